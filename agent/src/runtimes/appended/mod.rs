//! The interpreters whose kernel walker appends one word per frame after the native frames
//! (`sonde_abi::appended`: CRuby, PHP): each describes itself once ([`Interpreter`]: what it keeps of
//! a process, how it reads an object a frame runs, what its loop's native frame is), and shares the
//! cache of what was read ([`names::AppendedNames`]) and the namer that merges the frames in place of
//! the loop's native frames ([`naming::AppendedNaming`]).

use std::sync::Arc;

use crate::{
    process::ProcessInfo,
    profile::{Frame, Symbol},
    runtimes::{Runtime, memory::ProcessMemory},
};

pub(crate) mod names;
pub(crate) mod naming;

/// One interpreter whose frames are appended words.
pub(crate) trait Interpreter: Send + Sync + 'static {
    /// The interpreter as capture found it in a process (its instance in the process's info).
    type Vm: Send + Sync + 'static;
    /// What is read of one object a frame runs (a Ruby instruction sequence, a PHP function).
    type Code: Send + Sync + 'static;
    /// The runtime it is.
    const RUNTIME: Runtime;
    /// Its words' tag (`sonde_abi::appended`).
    const TAG: u64;
    /// The mapping its frames are reported in (`[ruby]`, `[php]`).
    const PATH: &'static str;

    /// Reads the object at `object` in a process running `vm`; None when unreadable.
    fn read(memory: &ProcessMemory, vm: &Self::Vm, object: u64) -> Option<Self::Code>;
    /// Notes what the kernel announced with `object` (`detail`, non-zero), at each announcement,
    /// whether the object was read before or not.
    fn note(_memory: &ProcessMemory, _vm: &Self::Vm, _object: u64, _detail: u64) {}
    /// The symbol of a frame running `code` at `position`, in a process running `vm`.
    fn symbol(vm: &Self::Vm, code: &Self::Code, position: u32) -> Symbol;
    /// Whether the symbol of `code`'s frames is final; when not (it waits for a note), they are
    /// named again at each window until it is.
    fn settled(_vm: &Self::Vm, _code: &Self::Code) -> bool {
        true
    }
    /// Whether native frame `i` of `frames` (leaf to root) is a call of the interpreter's loop,
    /// which the frames one call ran take the place of.
    fn is_loop(frames: &[Frame], i: usize) -> bool;
}

/// The interpreter `I` runs in `process`, if its capture found one.
pub(crate) fn vm_of<I: Interpreter>(process: &ProcessInfo) -> Option<Arc<I::Vm>> {
    crate::runtimes::seam::instance_of(process, I::RUNTIME.name())
}
