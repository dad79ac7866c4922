//! Whole-map reads and writes in one syscall per many elements (`BPF_MAP_LOOKUP_BATCH`,
//! `BPF_MAP_LOOKUP_AND_DELETE_BATCH`, `BPF_MAP_UPDATE_BATCH`, Linux 5.6+). aya 0.14 reads a map one
//! element per syscall: the off-CPU controller reads and writes 2048 per-process slots ten times a
//! second, which would be 40,000 syscalls a second; and draining a window's hash maps took three
//! syscalls per entry (next key, lookup, delete), 16% of the daemon's CPU with 1,000 services.

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::{Pod, maps::MapData};

use super::BpfError;

/// `bpf(2)` commands (`include/uapi/linux/bpf.h`).
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
/// The kernel's `ENOTSUPP` (not in libc): what Linux before 5.12 answers a batch lookup of a
/// per-CPU array.
const ENOTSUPP: i32 = 524;

/// The `batch` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

fn call(command: libc::c_long, attr: &mut BatchAttr, map: &'static str) -> Result<(), BpfError> {
    // SAFETY: `attr` is a valid batch attribute whose pointers reference buffers the caller keeps alive
    // for the call, each sized for `attr.count` elements.
    unsafe { bpf(command, attr) }
        .map(drop)
        .map_err(|source| BpfError::Batch { map, source })
}

/// `bpf(2)` for a command aya 0.14 lacks, `attr` being that command's member of `union bpf_attr`;
/// the call's non-negative result (a new descriptor for the commands that make one).
///
/// # Safety
/// `attr` is `command`'s attribute layout, and every pointer in it references memory the caller
/// keeps alive, sized as the attribute says.
pub(super) unsafe fn bpf<A>(command: libc::c_long, attr: &mut A) -> std::io::Result<i32> {
    // SAFETY: the caller's contract.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            std::ptr::from_mut(attr),
            size_of::<A>(),
        )
    };
    match rc {
        0.. => Ok(rc as i32),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Every element of the per-CPU `u64` array `map` of `len` elements, summed over the `cpus` possible
/// CPUs, in index order.
pub(crate) fn read_all_summed(
    map: &MapData,
    len: u32,
    cpus: usize,
    name: &'static str,
) -> Result<Vec<u64>, BpfError> {
    let mut keys = vec![0u32; len as usize];
    // The kernel lays a per-CPU element out as one 8-byte-aligned value per possible CPU.
    let mut values = vec![0u64; len as usize * cpus];
    let mut out_batch = 0u32;
    let mut attr = BatchAttr {
        out_batch: std::ptr::from_mut(&mut out_batch) as u64,
        keys: keys.as_mut_ptr() as u64,
        values: values.as_mut_ptr() as u64,
        count: len,
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        ..Default::default()
    };
    match call(BPF_MAP_LOOKUP_BATCH, &mut attr, name) {
        Ok(()) => {}
        Err(BpfError::Batch { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {}
        Err(BpfError::Batch { source, .. }) if source.raw_os_error() == Some(ENOTSUPP) => {
            return read_each_summed(map, len, cpus, name);
        }
        Err(err) => return Err(err),
    }
    let mut out = vec![0u64; len as usize];
    for (i, key) in keys.iter().enumerate().take(attr.count as usize) {
        if let Some(slot) = out.get_mut(*key as usize) {
            *slot = values[i * cpus..(i + 1) * cpus].iter().sum();
        }
    }
    Ok(out)
}

/// [`read_all_summed`] one element per syscall, for kernels without batch lookups of per-CPU arrays
/// (before Linux 5.12: the legacy programs' kernels).
fn read_each_summed(
    map: &MapData,
    len: u32,
    cpus: usize,
    name: &'static str,
) -> Result<Vec<u64>, BpfError> {
    /// The `map_elem` member of `union bpf_attr`.
    #[repr(C, align(8))]
    struct ElemAttr {
        map_fd: u32,
        _pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    let mut values = vec![0u64; cpus];
    let mut out = Vec::with_capacity(len as usize);
    for index in 0..len {
        let mut attr = ElemAttr {
            map_fd: map.fd().as_fd().as_raw_fd() as u32,
            _pad: 0,
            key: std::ptr::from_ref(&index) as u64,
            value: values.as_mut_ptr() as u64,
            flags: 0,
        };
        // SAFETY: `attr` is BPF_MAP_LOOKUP_ELEM's attribute; the key and the per-CPU value buffer
        // (one 8-byte value per possible CPU) outlive the call.
        unsafe { bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) }
            .map_err(|source| BpfError::Batch { map: name, source })?;
        out.push(values.iter().sum());
    }
    Ok(out)
}

/// Reads and deletes every entry of the hash map `map`, whose keys are `K`s and values `V`s, many
/// entries per syscall. Only for a map no program writes meanwhile (a drained slot).
pub(crate) fn take_all<K: Pod, V: Pod>(
    map: &MapData,
    name: &'static str,
) -> Result<Vec<(K, V)>, BpfError> {
    // SAFETY: `Pod` types are plain data, valid for any bit pattern, zeroes included.
    let (zero_key, zero_value) = unsafe { (std::mem::zeroed::<K>(), std::mem::zeroed::<V>()) };
    let mut chunk = 256usize;
    let mut out = Vec::new();
    // The position to go on from, as the kernel left it (a bucket index for hash maps).
    let mut token: Option<u64> = None;
    loop {
        let mut keys = vec![zero_key; chunk];
        let mut values = vec![zero_value; chunk];
        let mut next = 0u64;
        let mut attr = BatchAttr {
            in_batch: token.as_ref().map_or(0, |t| std::ptr::from_ref(t) as u64),
            out_batch: std::ptr::from_mut(&mut next) as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: map.fd().as_fd().as_raw_fd() as u32,
            ..Default::default()
        };
        let done = match call(BPF_MAP_LOOKUP_AND_DELETE_BATCH, &mut attr, name) {
            Ok(()) => false,
            Err(BpfError::Batch { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
                true
            }
            // One bucket holds more entries than the buffer: a bigger one, from the same place.
            Err(BpfError::Batch { source, .. })
                if source.raw_os_error() == Some(libc::ENOSPC) && chunk < 1 << 16 =>
            {
                chunk *= 2;
                continue;
            }
            Err(err) => return Err(err),
        };
        let got = (attr.count as usize).min(chunk);
        out.extend(keys.into_iter().zip(values).take(got));
        if done {
            return Ok(out);
        }
        token = Some(next);
    }
}

/// Writes `values` to the array `map`, element `i` at index `i`.
pub(crate) fn write_all<V: Pod>(
    map: &MapData,
    values: &[V],
    name: &'static str,
) -> Result<(), BpfError> {
    let keys: Vec<u32> = (0..values.len() as u32).collect();
    let mut attr = BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: values.len() as u32,
        map_fd: map.fd().as_fd().as_raw_fd() as u32,
        ..Default::default()
    };
    call(BPF_MAP_UPDATE_BATCH, &mut attr, name)
}
