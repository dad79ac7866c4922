//! PHP's JIT (opcache's, on x86_64): its code runs on the native frame of the executor's loop.
//! `execute_ex` jumps to a JIT-compiled function's code rather than calling it, and that code keeps
//! the loop's stack frame (the hybrid VM reserves room in it for the JIT's spills), so a sample in JIT
//! code unwinds exactly as one in the loop's body: with the rule `execute_ex`'s CFI gives its body
//! ([`super::elf::PhpElf::loop_body`]). The JIT's code buffer lies at the end of opcache's shared
//! memory, an anonymous shared mapping the kernel names `/dev/zero (deleted)`.
//!
//! Architecture-specific: whether JIT code runs on its loop's frame is the architecture's to say
//! (`platform::arch::PHP_JIT_ON_LOOP_FRAME`: on AArch64 it does not, and keeps the frame-pointer
//! step).

use super::{elf, vm::PhpVm};
use crate::{
    platform::arch::PHP_JIT_ON_LOOP_FRAME as ON_LOOP_FRAME,
    process::{Mapping, ProcessInfo},
    profile::Frame,
    runtimes::seam::{JitFrame, instance_of},
};

/// The path of the mapping holding the JIT's code (` (deleted)` stripped).
const JIT_PATH: &str = "/dev/zero";

/// `seam::UnwindAs` of PHP: the JIT's code buffer of a process running PHP unwinds with
/// `execute_ex`'s body rule, from the table of the binary holding the executor.
pub(crate) fn unwind_as(process: &ProcessInfo, m: &Mapping) -> Option<JitFrame> {
    if !ON_LOOP_FRAME || m.module.path != JIT_PATH {
        return None;
    }
    let body = instance_of::<PhpVm>(process, super::NAME)?.loop_body?;
    let binary = process
        .mappings
        .iter()
        .position(|b| b.binary.as_deref().and_then(elf::of).is_some())?;
    Some(JitFrame::OnLoop {
        binary,
        address: body,
    })
}

/// Whether `frame` is in the JIT's code: the loop's frame of the frames that code runs.
pub(crate) fn is_jit(frame: &Frame) -> bool {
    ON_LOOP_FRAME && frame.module.as_ref().is_some_and(|m| m.path == JIT_PATH)
}
