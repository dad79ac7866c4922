//! A thread-local variable a binary defines, read as the binary is first opened: its offset in the
//! module's TLS block, and the slots the dynamic linker fills with where the module's TLS went (its
//! TLSDESC, DTPMOD64 and TPOFF64 relocations).

use object::{
    Object as _, ObjectSymbol as _, RelocationFlags, RelocationTarget, SymbolKind,
    elf::{ET_EXEC, PT_INTERP},
    read::elf::ProgramHeader as _,
};

/// A slot of the binary's GOT that the dynamic linker fills, at its link-time address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A TLS descriptor of the variable: the resolver, then its argument.
    Descriptor(u64),
    /// The module's index in the DTV.
    Module(u64),
    /// The variable's offset from the thread pointer (initial-exec).
    ThreadOffset(u64),
}

/// A binary defining a thread-local variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TlsVariable {
    /// The variable's offset in the module's TLS block (its symbol's value).
    pub(crate) offset: u64,
    /// Whether the binary is a program (not a library): its TLS is module 1 of its process.
    pub(crate) program: bool,
    /// Where the dynamic linker says where the module's TLS is, best first.
    pub(crate) slots: Vec<Slot>,
}

/// The thread-local variable `name` that `file` defines, if it does.
pub(crate) fn variable(file: &object::File, name: &str) -> Option<TlsVariable> {
    let defined = |s: &object::Symbol| {
        s.name() == Ok(name) && s.kind() == SymbolKind::Tls && !s.is_undefined()
    };
    // Exported, or in `.symtab` for a program that does not export it.
    let (index, offset) = match file.dynamic_symbols().find(|s| defined(s)) {
        Some(s) => (Some(s.index()), s.address()),
        None => (None, file.symbols().find(|s| defined(s))?.address()),
    };
    let mut slots: Vec<Slot> = file
        .dynamic_relocations()
        .into_iter()
        .flatten()
        .filter_map(|(at, reloc)| {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                return None;
            };
            let ours = match reloc.target() {
                RelocationTarget::Symbol(s) => Some(s) == index,
                // A module's own index (local-dynamic): no symbol.
                _ => true,
            };
            match kind(r_type)? {
                Kind::Module if !ours => None,
                Kind::Descriptor if ours => Some(Slot::Descriptor(at)),
                Kind::ThreadOffset if ours => Some(Slot::ThreadOffset(at)),
                Kind::Module => Some(Slot::Module(at)),
                _ => None,
            }
        })
        .collect();
    slots.sort_by_key(|s| match s {
        Slot::Descriptor(_) => 0,
        Slot::ThreadOffset(_) => 1,
        Slot::Module(_) => 2,
    });
    slots.dedup();
    Some(TlsVariable {
        offset,
        program: is_program(file),
        slots,
    })
}

enum Kind {
    Descriptor,
    Module,
    ThreadOffset,
}

/// The relocation types that say where a module's TLS is.
fn kind(r_type: u32) -> Option<Kind> {
    let types = &crate::platform::arch::TLS_RELOCATIONS;
    match r_type {
        t if t == types.descriptor => Some(Kind::Descriptor),
        t if t == types.module => Some(Kind::Module),
        t if t == types.thread_offset => Some(Kind::ThreadOffset),
        _ => None,
    }
}

/// A program, not a library: a fixed-address executable, or a PIE (it asks for an interpreter).
fn is_program(file: &object::File) -> bool {
    match file {
        object::File::Elf64(elf) => {
            let endian = elf.endian();
            elf.elf_header().e_type.get(endian) == ET_EXEC
                || elf
                    .elf_program_headers()
                    .iter()
                    .any(|p| p.p_type(endian) == PT_INTERP)
        }
        _ => false,
    }
}
