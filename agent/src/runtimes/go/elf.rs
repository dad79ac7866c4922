//! Whether a binary is Go's, read once per binary as it is first captured
//! (`process::elf_info::ElfReader`): `.gopclntab`, or Go's build id note or build info where an
//! external linker folded the table into `.data.rel.ro`.

use std::sync::Arc;

use crate::process::{ElfReader, RuntimeFact, elf_info::has_section};

/// A Go binary: named from its own table (`super::GoNames`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GoElf;

/// Marks Go binaries as they are first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read,
};

fn read(file: &object::File, _: &[u8]) -> Option<RuntimeFact> {
    [".gopclntab", ".note.go.buildid", ".go.buildinfo"]
        .iter()
        .any(|name| has_section(file, name))
        .then(|| Arc::new(GoElf) as RuntimeFact)
}

/// Whether `binary` is a Go binary.
pub(crate) fn is_go(binary: &crate::process::Binary) -> bool {
    binary.fact::<GoElf>(super::NAME).is_some()
}
