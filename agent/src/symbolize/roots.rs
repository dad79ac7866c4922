//! Thread entry points: a user stack whose outermost frame is one of these was walked completely.

use crate::profile::Frame;

/// Functions that start threads on Linux (glibc, musl, Rust std, Go's runtime).
const ROOTS: &[&str] = &[
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "thread_start",
    "runtime.goexit",
    "runtime.rt0_go",
    "runtime.mstart",
    // Go's switches to the thread's system stack (g0): the frames above them are on another stack,
    // where Go's own tracebacks (and its CPU profiles, before Go 1.21) end too.
    "runtime.systemstack",
    "runtime.mcall",
    "runtime.morestack",
];

/// Whether `outermost` is a known thread entry point.
pub(super) fn is_root(outermost: Option<&Frame>) -> bool {
    outermost
        .and_then(Frame::function)
        .is_some_and(|name| ROOTS.contains(&name))
}
