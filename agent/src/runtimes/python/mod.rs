//! CPython processes: finding the interpreter in a captured process (`detect`), the structure offsets of
//! each version (`offsets`), and naming the Python frames the kernel stored (code objects read from the
//! process, `code`, `linetable`), merged into the native stack in place of the evaluation loop's frames
//! (`runtimes::merge`). The kernel's side of the contract is `sonde_abi::python`.

pub(crate) mod capture;
pub(crate) mod code;
pub(crate) mod debug_offsets;
pub(crate) mod detect;
pub(crate) mod elf;
pub(crate) mod figures;
pub(crate) mod linetable;
mod names;
pub(crate) mod naming;
#[cfg(test)]
mod naming_tests;
pub(crate) mod offsets;
#[cfg(test)]
pub(crate) mod peer;
pub(crate) mod register;
pub(crate) mod strings;

pub(crate) use capture::interpreter_of;
pub(crate) use names::PythonNames;

/// The runtime's name (`--runtimes python`), under which what it finds is kept.
pub(crate) const NAME: &str = super::Runtime::Python.name();
