//! CRuby processes: finding the VM in a captured process (its binary's facts, [`elf`]; the structure
//! offsets of its version, [`offsets`]; where its threads keep their execution context, through
//! `runtimes::tls`), handed to the kernel's walker (agent-ebpf `unwind/ruby.rs`), then naming the
//! Ruby frames the kernel stored (instruction sequences read from the process, `iseq`), merged into
//! the native stack in place of the VM loop's frames (`runtimes::appended`, [`interpreter`]). The kernel's side of the
//! contract is `sonde_abi::ruby`.

pub(crate) mod capture;
pub(crate) mod elf;
pub(crate) mod figures;
pub(crate) mod interpreter;
mod iseq;
mod jit;
pub(crate) mod offsets;
mod owner;
pub(crate) mod register;
mod strings;
mod vm;

/// The runtime's name (`--runtimes ruby`), under which what it finds is kept.
pub(crate) const NAME: &str = super::Runtime::Ruby.name();
