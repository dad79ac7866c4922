//! A step repeated until it says stop, the way the running kernel allows: `bpf_loop` (Linux 5.17+)
//! in the full object, a bounded loop in the object for Linux 5.10 to 6.0 (feature `legacy`, built
//! beside it by `agent/build.rs`; the loader picks one from the kernel's features).
//!
//! With `bpf_loop` the verifier checks a step once, whatever the count. A bounded loop it checks
//! once per iteration, so in the legacy object a step's body must be small: the frame steps there
//! are global functions that take scalars only (Linux 5.10 refuses pointer arguments to global
//! functions, which came in 5.12) and find their memory themselves (`crate::unwind::steps`).

use core::ffi::c_void;

/// A step: called with its iteration's index and the caller's context, answers 0 to go on and 1 to
/// stop, as a `bpf_loop` callback does.
pub type Step = extern "C" fn(u64, *mut c_void) -> i64;

/// Calls `step` with `0..count` until it answers 1. `count` must be bounded where the verifier can
/// see it (a constant, or a value clamped by the caller): the legacy object's loop runs to it.
#[inline(always)]
pub fn repeat(count: u32, step: Step, ctx: *mut c_void) {
    #[cfg(not(feature = "legacy"))]
    // SAFETY: `step` has bpf_loop's callback signature, and uses `ctx` only while the loop runs.
    unsafe {
        aya_ebpf::helpers::generated::bpf_loop(count, step as *mut c_void, ctx, 0)
    };
    #[cfg(feature = "legacy")]
    for index in 0..count {
        if step(u64::from(index), ctx) != 0 {
            break;
        }
    }
}
