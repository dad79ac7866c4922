//! Which program walks a sample. The attached programs (`sonde_on_cpu`, `sonde_off_cpu`) only
//! dispatch: a sample of a JVM or a Node.js process goes, by a tail call, to the program of its
//! runtime, which walks that runtime's frames beside the native ones; every other sample to the
//! native program (native frames, Python's, Go's labels). Each program is verified on its own, so
//! each runtime's steps are checked beside the native step only, and userspace loads a runtime's
//! programs only once a process of that runtime is found; until then its samples go to the native
//! program, counted. The dispatchers hold nothing but the tail calls: a program that makes tail
//! calls gets no private stack for its subprograms, and the walkers need theirs.

use aya_ebpf::{EbpfContext, helpers::bpf_get_current_pid_tgid, maps::ProgramArray};
use sonde_abi::{names::runtime_programs, stat};

use crate::{
    globals,
    maps::{HS_PROCS, V8_PROCS, bump},
};

/// What a program walks besides native frames: a const parameter of the sample path, so each
/// program holds the steps of one runtime and no other.
pub mod walker {
    /// Native frames (and Python's).
    pub const NATIVE: u32 = 0;
    /// Native and Java frames.
    pub const JAVA: u32 = 1;
    /// Native and JavaScript frames.
    pub const V8: u32 = 2;
}

/// Hands the current task's sample (or switch) to the program in `programs` that walks it. Returns
/// only when no program took it (the native program missing: counted as a program error).
#[inline(always)]
pub fn dispatch<C: EbpfContext>(ctx: &C, programs: &ProgramArray) {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // The idle task (tgid 0) runs no runtime.
    let runtime = if tgid == 0 {
        None
    } else if globals::java_frames() != 0 && HS_PROCS.get_ptr(tgid).is_some() {
        Some(runtime_programs::JAVA)
    } else if globals::v8_frames() != 0 && V8_PROCS.get_ptr(tgid).is_some() {
        Some(runtime_programs::V8)
    } else {
        None
    };
    if let Some(index) = runtime {
        // SAFETY: a tail call into a program of the same type, with the same context; on success
        // it does not return.
        unsafe { programs.tail_call(ctx, index) };
        // Not loaded yet: walked natively.
        bump(stat::RUNTIME_PROGRAM_PENDING);
    }
    // SAFETY: as above.
    unsafe { programs.tail_call(ctx, runtime_programs::NATIVE) };
    bump(stat::PROGRAM_ERRORS);
}
