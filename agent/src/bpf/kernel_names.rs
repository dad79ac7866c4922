//! Kernel function names by the kernel's own symbol lookup: runs `sonde_kernel_names` on demand
//! (`BPF_PROG_TEST_RUN`) with a batch of addresses and reads their `%ps` from its ring buffer (see
//! `sonde_abi::kernel_names`). A window's few hundred kernel addresses cost about a millisecond;
//! naming them from `/proc/kallsyms` made the kernel format all of its ~120,000 lines first (~40 ms,
//! a quarter of a short recording's CPU), and the daemon kept a compact copy (0.9 MB) that went
//! stale when a module loaded. Needs Linux 5.13 (`bpf_snprintf`); without it the symbolizer reads
//! kallsyms as before.

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::{
    Ebpf,
    maps::{MapData, RingBuf},
    programs::{ProgramFd, RawTracePoint},
};
use sonde_abi::{
    kernel_names::{BATCH, KernelName, PROGRAM},
    names,
};

use super::{BpfError, batch::bpf, maps::take_map, object::typed_program};

/// `bpf(2)` command (`include/uapi/linux/bpf.h`).
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The `test` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Explicit, so zeroed: the kernel refuses an attribute with non-zero bytes past its fields.
    _pad: u32,
}

/// The loaded program and its ring buffer.
pub(crate) struct KernelNames {
    program: ProgramFd,
    ring: RingBuf<MapData>,
}

impl KernelNames {
    /// Loads the program of `ebpf` (never attached) and takes its ring buffer. `None`, with the reason
    /// logged, where the kernel refuses it (before 5.13): kernel frames are then named from kallsyms.
    pub(crate) fn load(ebpf: &mut Ebpf) -> Option<Self> {
        match Self::try_load(ebpf) {
            Ok(names) => Some(names),
            Err(err) => {
                tracing::info!(%err, "kernel frames are named from /proc/kallsyms: the kernel's own lookup is unavailable");
                None
            }
        }
    }

    fn try_load(ebpf: &mut Ebpf) -> Result<Self, BpfError> {
        let err = |source| BpfError::Program {
            program: PROGRAM,
            source,
        };
        let program: &mut RawTracePoint = typed_program(ebpf, PROGRAM)?;
        program.load().map_err(err)?;
        // An owned descriptor keeps the program loaded whatever becomes of `ebpf`.
        let program = program
            .fd()
            .and_then(|fd| fd.try_clone().map_err(aya::programs::ProgramError::from))
            .map_err(err)?;
        let ring = take_map(ebpf, names::KERNEL_NAMES)?;
        Ok(Self { program, ring })
    }

    /// Runs the program once on `args`, its records left in the ring.
    fn run(&self, args: &mut [u64; BATCH]) -> std::io::Result<()> {
        let mut attr = TestRunAttr {
            prog_fd: self.program.as_fd().as_raw_fd() as u32,
            ctx_in: args.as_mut_ptr() as u64,
            ctx_size_in: size_of_val(args) as u32,
            ..Default::default()
        };
        // SAFETY: `attr` is the test-run attribute; its one pointer, the context, is `args`, alive
        // for the call and `ctx_size_in` bytes long.
        unsafe { bpf(BPF_PROG_TEST_RUN, &mut attr) }.map(drop)
    }
}

/// Names kernel addresses by the kernel's own symbol lookup: the symbolizer's way to kernel names,
/// a trait so its tests can stand in for the kernel.
pub(crate) trait NameKernel: Send {
    /// The function holding each of `addrs`, in order; `None` where no symbol does.
    fn names(&mut self, addrs: &[u64]) -> std::io::Result<Vec<Option<String>>>;
}

impl NameKernel for KernelNames {
    fn names(&mut self, addrs: &[u64]) -> std::io::Result<Vec<Option<String>>> {
        let mut out = vec![None; addrs.len()];
        for (batch, chunk) in addrs.chunks(BATCH).enumerate() {
            let mut args = [0u64; BATCH];
            args[..chunk.len()].copy_from_slice(chunk);
            self.run(&mut args)?;
            while let Some(item) = self.ring.next() {
                let Some((index, name)) = record(&item) else {
                    continue;
                };
                if let Some(slot) = out.get_mut(batch * BATCH + index) {
                    *slot = function(name);
                }
            }
        }
        Ok(out)
    }
}

/// A record's argument index and name bytes; `None` for a record that is not a `KernelName`.
fn record(item: &[u8]) -> Option<(usize, &[u8])> {
    let word = |at: usize| Some(u32::from_ne_bytes(item.get(at..at + 4)?.try_into().ok()?));
    let index = word(std::mem::offset_of!(KernelName, index))? as usize;
    let len = word(std::mem::offset_of!(KernelName, len))? as usize;
    let start = std::mem::offset_of!(KernelName, name);
    (index < BATCH).then_some(())?;
    Some((index, item.get(start..start + len)?))
}

/// The function of a `%ps` answer (`function` or `function [module]`); `None` for the bare address
/// the kernel prints when no symbol holds it.
fn function(printed: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(printed).ok()?;
    let name = text.split(' ').next()?;
    (!name.is_empty() && !name.starts_with("0x")).then(|| name.to_owned())
}

/// The embedded object loaded with its default map sizes and nothing attached, and its namer: for
/// tests that ask the running kernel for names.
#[cfg(test)]
pub(crate) fn load_for_tests() -> (Ebpf, KernelNames) {
    let mut ebpf = aya::EbpfLoader::new()
        .load(super::object::OBJECT)
        .expect("loading the eBPF object (the tests run as root)");
    let names = KernelNames::try_load(&mut ebpf).expect("loading sonde_kernel_names");
    (ebpf, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_name_loses_its_module_and_a_bare_address_is_no_name() {
        assert_eq!(function(b"schedule").as_deref(), Some("schedule"));
        assert_eq!(function(b"ext4_read [ext4]").as_deref(), Some("ext4_read"));
        assert_eq!(function(b"0xffffffffc0201000"), None);
        assert_eq!(function(b""), None);
        assert_eq!(function(b"\xff\xfe"), None);
    }

    #[test]
    fn records_out_of_bounds_are_skipped() {
        let mut item = vec![0u8; size_of::<KernelName>()];
        item[0..4].copy_from_slice(&3u32.to_ne_bytes());
        item[4..8].copy_from_slice(&8u32.to_ne_bytes());
        item[8..16].copy_from_slice(b"schedule");
        assert_eq!(record(&item), Some((3, &b"schedule"[..])));
        item[0..4].copy_from_slice(&(BATCH as u32).to_ne_bytes());
        assert_eq!(record(&item), None);
        item[0..4].copy_from_slice(&0u32.to_ne_bytes());
        item[4..8].copy_from_slice(&10_000u32.to_ne_bytes());
        assert_eq!(record(&item), None);
        assert_eq!(record(&item[..6]), None);
    }
}
