//! A PHP executor found in a process: what capture keeps of it, and what the namer reads through.

use sonde_abi::php::PhpProc;

use super::offsets::Layout;

/// A PHP executor found in a process.
#[derive(Debug)]
pub(crate) struct PhpVm {
    /// The binary holding it.
    pub(crate) binary: String,
    pub(crate) layout: Layout,
    /// What the kernel was given.
    pub(crate) settings: PhpProc,
    /// Link-time address of the loop's body in `binary` (`super::jit`).
    pub(crate) loop_body: Option<u64>,
}
