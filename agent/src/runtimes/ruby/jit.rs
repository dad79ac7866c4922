//! YJIT's code (Ruby 3.1, x86_64): it lives in one anonymous executable mapping, which no binary's
//! table covers. 3.1's YJIT enters its code through one prologue that pushes three registers and
//! keeps no frame pointer, and runs (and calls C from) that one frame until it returns to the VM's
//! loop caller, so every address of the mapping unwinds with one rule
//! (`platform::arch::YJIT_3_1_FRAME`), given to the kernel as the mapping's own
//! (`sonde_abi::unwind::MAPPING_RULE`). Without it the native walk stopped at the first YJIT frame:
//! the Ruby frames were named but the stack below them lost.
//!
//! The frame is then an unnamed frame right below `rb_vm_exec`: the Ruby frames its code ran take its
//! place (`super::interpreter`), as they take `vm_exec_core`'s.

use super::vm::RubyVm;
use crate::{
    platform::arch::YJIT_3_1_FRAME,
    process::{JIT_PATH, Mapping, ProcessInfo},
    profile::Frame,
    runtimes::seam::{JitFrame, instance_of},
};

/// `seam::UnwindAs` of CRuby: a process running Ruby 3.1 unwinds its anonymous executable code with
/// YJIT's frame rule.
pub(crate) fn unwind_as(process: &ProcessInfo, m: &Mapping) -> Option<JitFrame> {
    let rule = YJIT_3_1_FRAME?;
    if m.module.path != JIT_PATH {
        return None;
    }
    let vm = instance_of::<RubyVm>(process, super::NAME)?;
    vm.layout.yjit_3_1.then_some(JitFrame::Fixed(rule))
}

/// Whether `frame`, of a process running Ruby, is in YJIT's code: anonymous executable memory (3.1's
/// MJIT loads its code from files).
pub(crate) fn is_jit(frame: &Frame) -> bool {
    frame.module.as_ref().is_some_and(|m| m.path == JIT_PATH)
}
