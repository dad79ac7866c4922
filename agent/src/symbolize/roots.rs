//! Thread entry points: a user stack whose outermost frame is one of these was walked completely.

use crate::{profile::Frame, runtimes::seam::RuntimeNames};

/// Functions that start threads on Linux (glibc, musl, Rust std); runtimes that start their own
/// threads name theirs (`RuntimeNames::roots`). ld.so's `_dl_start_user` runs a dynamically linked
/// process's initializers (`_dl_init`) before it jumps to the program's `_start`: nothing calls it
/// (its code follows ld.so's own `_start`, and the unwind table makes that entry code a root).
const ROOTS: &[&str] = &[
    "_start",
    "_dl_start_user",
    "__libc_start_main",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "thread_start",
];

/// Whether `outermost` is a known thread entry point.
pub(super) fn is_root(outermost: Option<&Frame>, runtimes: &[Box<dyn RuntimeNames>]) -> bool {
    outermost.and_then(Frame::function).is_some_and(|name| {
        ROOTS.contains(&name) || runtimes.iter().any(|r| r.roots().contains(&name))
    })
}
