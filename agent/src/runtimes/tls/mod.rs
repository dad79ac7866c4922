//! Thread-local variables of a process, for the kernel to read at each sample: which binaries define
//! one ([`variable`]), and where a process's dynamic linker put it ([`place`]). Shared by every
//! runtime whose state a thread keeps in TLS (the OpenTelemetry thread context, Ruby's execution
//! context).

mod place;
mod variable;

pub(crate) use place::{Libc, Unplaced, place};
pub(crate) use variable::{Slot, TlsVariable, variable};
