//! PHP processes: finding the executor in a captured process (its binary's facts, [`elf`]; the
//! structure offsets of its version, [`offsets`]), handed to the kernel's walker (agent-ebpf
//! `unwind/php.rs`), then naming the PHP frames the kernel stored (functions read from the process,
//! [`function`]), merged into the native stack in place of the executor's frames
//! (`runtimes::appended`, [`interpreter`]). The kernel's side of the contract is `sonde_abi::php`.

pub(crate) mod capture;
pub(crate) mod elf;
pub(crate) mod figures;
mod function;
pub(crate) mod interpreter;
mod jit;
pub(crate) mod offsets;
pub(crate) mod register;
mod vm;

/// The runtime's name (`--runtimes php`), under which what it finds is kept.
pub(crate) const NAME: &str = super::Runtime::Php.name();
