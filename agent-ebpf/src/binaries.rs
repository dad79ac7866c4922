//! Runtime settings by binary: a process that maps a file userspace already found a runtime in
//! (`PY_FILES`: CPython's `_PyRuntime` exporter) gets its settings from the kernel at the `exec` or
//! `mmap` that maps it (`crate::vmas`), relocated to where it is mapped. Its first samples then walk
//! the runtime's frames, where userspace would capture it tens of milliseconds later on a busy node,
//! or never (a Python script living half a second). Userspace's own capture overwrites the entry;
//! one written here is removed here at the process's exit (userspace may never have seen it) or exec.

use aya_ebpf::bindings::BPF_NOEXIST;
use sonde_abi::{
    FileKey,
    python::{PyProc, origin},
    stat,
};

use crate::maps::{PY_FILES, PY_PROCS, bump};

/// Process `tgid` mapped `file` executable, its offset 0 at `file_base`.
#[inline(always)]
pub fn mapped(tgid: u32, file: &FileKey, file_base: u64) {
    let Some(settings) = PY_FILES.get_ptr(file) else {
        return;
    };
    // SAFETY: a pointer from a successful lookup, copied at once.
    let mut settings: PyProc = unsafe { *settings };
    settings.interp_head = settings.interp_head.wrapping_add(file_base);
    if settings.gil_tstate != 0 {
        settings.gil_tstate = settings.gil_tstate.wrapping_add(file_base);
    }
    settings.origin = origin::BINARY;
    // Never over userspace's own (or an earlier mapping's): full or present, nothing to do.
    if PY_PROCS.insert(tgid, &settings, BPF_NOEXIST as u64).is_ok() {
        bump(stat::PY_BY_BINARY);
    }
}

/// Process `tgid` execs: settings of its old image are wrong for the new one, whoever wrote them
/// (userspace captures the new image again).
#[inline(always)]
pub fn exec(tgid: u32) {
    let _ = PY_PROCS.remove(tgid);
}

/// The leader of `tgid` exits: settings the kernel wrote go with it.
#[inline(always)]
pub fn exited(tgid: u32) {
    // SAFETY: a pointer from a successful lookup, read at once.
    let ours = PY_PROCS
        .get_ptr(tgid)
        .is_some_and(|p| unsafe { (*p).origin } == origin::BINARY);
    if ours {
        let _ = PY_PROCS.remove(tgid);
    }
}
