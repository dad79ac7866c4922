//! Whether a binary defines the thread-context variable, read once per binary as it is first opened
//! (`process::elf_info::ElfReader`), as a [`TlsVariable`].

use std::sync::Arc;

use super::{NAME, VARIABLE};
use crate::{
    process::{ElfReader, RuntimeFact},
    runtimes::tls::{TlsVariable, variable},
};

/// Marks binaries defining the variable as they are first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: NAME,
    read,
};

fn read(file: &object::File, _: &[u8]) -> Option<RuntimeFact> {
    variable(file, VARIABLE).map(|v| Arc::new(v) as RuntimeFact)
}

/// What `binary` says of the variable, if it defines it.
pub(crate) fn of(binary: &crate::process::Binary) -> Option<&TlsVariable> {
    binary.fact::<TlsVariable>(NAME)
}
