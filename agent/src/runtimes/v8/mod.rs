//! Node.js (V8 10 to 12: Node 18, 20 and 22, x86_64) processes: finding V8 in a captured process and
//! reading `node`'s own description of its structures (`detect`, `layout`, from the ELF file), the
//! kernel's settings for it (`V8_PROCS`, `sonde_abi::v8`), and naming the JavaScript frames the
//! kernel stored in place among the native ones: functions, their scripts and lines (`objects`,
//! `heap`, `positions`), optimized code with the functions it inlined, cached and validated per
//! process (`names`).

pub(crate) mod capture;
pub(crate) mod detect;
pub(crate) mod elf;
pub(crate) mod figures;
mod heap;
pub(crate) mod layout;
mod names;
pub(crate) mod naming;
mod objects;
mod positions;
pub(crate) mod register;
#[cfg(test)]
mod tests;

pub(crate) use capture::node_of;
pub(crate) use detect::Node;
pub(crate) use names::{V8Names, marker_name};

/// The runtime's name (`--runtimes node`), under which what it finds is kept.
pub(crate) const NAME: &str = super::Runtime::Node.name();
