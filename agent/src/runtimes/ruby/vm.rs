//! A Ruby VM found in a process: what capture keeps of it, and what the namer reads through.

use sonde_abi::ruby::RbProc;

use super::offsets::Layout;

/// A Ruby VM found in a process.
#[derive(Debug)]
pub(crate) struct RubyVm {
    /// The binary holding it.
    pub(crate) binary: String,
    pub(crate) layout: Layout,
    /// What the kernel was given.
    pub(crate) settings: RbProc,
}
