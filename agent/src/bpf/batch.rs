//! Whole-array reads and writes in one syscall each (`BPF_MAP_LOOKUP_BATCH` / `BPF_MAP_UPDATE_BATCH`,
//! Linux 5.6+). aya 0.14 reads an array one element per syscall; the off-CPU controller reads and
//! writes 2048 per-process slots ten times a second, which would be 40,000 syscalls a second.

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::{Pod, maps::MapData};

use super::BpfError;

/// `bpf(2)` commands (`include/uapi/linux/bpf.h`).
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;

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
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            std::ptr::from_mut(attr),
            size_of::<BatchAttr>(),
        )
    };
    if rc < 0 {
        return Err(BpfError::Batch {
            map,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
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
