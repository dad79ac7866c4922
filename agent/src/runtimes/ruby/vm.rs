//! A Ruby VM found in a process: what capture keeps of it, and what the namer reads through.

use std::sync::Arc;

use sonde_abi::ruby::RbProc;

use super::offsets::Layout;
use crate::process::ProcessInfo;

/// A Ruby VM found in a process.
#[derive(Debug)]
pub(crate) struct RubyVm {
    /// The binary holding it.
    pub(crate) binary: String,
    pub(crate) layout: Layout,
    /// What the kernel was given.
    pub(crate) settings: RbProc,
}

/// The VM `process` runs, if Ruby capture found one.
pub(crate) fn vm_of(process: &ProcessInfo) -> Option<Arc<RubyVm>> {
    crate::runtimes::seam::instance_of(process, super::NAME)
}
