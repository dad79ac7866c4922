//! The unwind table builder: turns one ELF binary's call frame information (`.eh_frame`, or
//! `.debug_frame` when there is no `.eh_frame`) into a compact table of [`UnwindRow`]s, sorted by
//! address, that the kernel binary-searches for every user stack frame.
//!
//! Steps: [`elf`] checks the binary and finds its CFI section; [`cfi`] evaluates every FDE's rows with
//! gimli and translates each with the rules of the architecture sonde was built for
//! (`crate::platform::arch::unwind_rules`);
//! [`assemble`] orders the FDEs, marks the gaps between them and merges equal neighbours.
//!
//! Limits: little-endian ELF of the build's architecture only; addresses are stored on 32 bits (ELF virtual addresses of
//! the binary, so binaries whose code lies above 4 GiB are refused); a rule the kernel cannot evaluate
//! becomes [`cfa::UNSUPPORTED`] rather than an error, so one odd function does not cost the whole
//! binary its table.
//!
//! [`cfa::UNSUPPORTED`]: sonde_abi::unwind::cfa::UNSUPPORTED

mod assemble;
mod cfi;
mod elf;
mod error;
#[cfg(test)]
pub(crate) mod tests;

use std::fs::File;

use gimli::{DebugFrame, EhFrame, LittleEndian};
use sonde_abi::UnwindRow;

use crate::{
    platform::arch,
    process::{
        Binary,
        untrusted::{Input, Reason, refusals},
    },
    runtimes::seam::CodeRows,
};

/// Largest CFI section read. Real binaries stay far below (a browser's `.eh_frame` is tens of MiB);
/// the bound keeps a crafted one from costing unbounded time (see THREAT_MODEL.md).
pub(crate) const MAX_CFI_BYTES: usize = 128 << 20;

/// Most rows one binary's table may hold: 64 MiB of rows, the default kernel budget for all tables.
pub(crate) const MAX_ROWS: usize = 8 << 20;

pub(crate) use error::TableError;

/// The unwind table of one binary.
#[derive(Debug, Clone)]
pub(crate) struct BuiltTable {
    /// Rows sorted by strictly increasing `pc`; no two neighbours carry the same rule.
    pub(crate) rows: Vec<UnwindRow>,
    /// What the table was built from and what it holds.
    pub(crate) stats: TableStats,
}

/// Counts describing a built table (the `*_rows` counts are over the final rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableStats {
    /// FDEs read from the section, zero-length ones included (they add no rows).
    pub(crate) fdes: u64,
    /// FDEs that could not be read or evaluated; their code is not unwound (one UNSUPPORTED row).
    pub(crate) bad_fdes: u64,
    /// Rows in the table.
    pub(crate) rows: u64,
    /// Rows with a rule the kernel cannot evaluate (`cfa::UNSUPPORTED`).
    pub(crate) unsupported_rows: u64,
    /// Rows of PLT stubs (`cfa::PLT`).
    pub(crate) plt_rows: u64,
    /// Rows of signal trampolines (`cfa::SIGNAL`).
    pub(crate) signal_rows: u64,
    /// Rows of thread roots (`cfa::END`).
    pub(crate) end_rows: u64,
    /// The section the rows came from.
    pub(crate) source: FrameSource,
    /// Functions whose rows a runtime gave from its own table, overriding the CFI.
    pub(crate) runtime_functions: u64,
}

/// The section holding a binary's call frame information.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameSource {
    /// `.eh_frame`, present in nearly every binary (the C++ and Rust runtimes unwind with it).
    EhFrame,
    /// `.debug_frame`, used only when `.eh_frame` is absent (`-fno-asynchronous-unwind-tables -g`).
    DebugFrame,
    /// Neither: a runtime's own table alone (a stripped Go binary's `.gopclntab`).
    Runtime,
}

/// Builds the unwind table of the ELF image `elf` from its CFI alone.
#[cfg(test)]
pub(crate) fn build(elf: &[u8]) -> Result<BuiltTable, TableError> {
    build_with(elf, None)
}

/// Builds the table of `elf` from its CFI and `runtime`'s own rows for its code, which override
/// the CFI where both cover an address and stand alone where the binary has no CFI.
fn build_with(elf: &[u8], runtime: Option<Vec<CodeRows>>) -> Result<BuiltTable, TableError> {
    let file = elf::open(elf)?;
    let (mut collected, source) = match elf::find_cfi(&file) {
        Ok(found) => (collect_cfi(&found)?, found.source),
        Err(_) if runtime.is_some() => (cfi::Collected::default(), FrameSource::Runtime),
        Err(e) => return Err(e),
    };
    let runtime_functions = match runtime {
        Some(functions) => {
            let n = functions.len() as u64;
            collected.add_functions(functions);
            n
        }
        None => 0,
    };
    if collected.rows.len() > MAX_ROWS {
        refusals::count(Input::UnwindTable, Reason::Budget);
        return Err(TableError::TooManyRows { limit: MAX_ROWS });
    }
    let mut rows = assemble::assemble(collected.fdes, &collected.rows);
    assemble::mark_entry_root(&mut rows, object::Object::entry(&file));
    let mut stats = assemble::stats(&rows, collected.fde_count, source);
    stats.bad_fdes = collected.bad_fdes;
    stats.runtime_functions = runtime_functions;
    Ok(BuiltTable { rows, stats })
}

/// Reads every FDE of the CFI section `found`.
fn collect_cfi(found: &elf::FoundCfi<'_>) -> Result<cfi::Collected, TableError> {
    let data: &[u8] = &found.data;
    if data.len() > MAX_CFI_BYTES {
        refusals::count(Input::UnwindTable, Reason::TooLarge);
        return Err(TableError::TooLarge {
            section: found.name,
            bytes: data.len() as u64,
            limit: MAX_CFI_BYTES as u64,
        });
    }
    match found.source {
        FrameSource::DebugFrame => {
            let mut section = DebugFrame::new(data, LittleEndian);
            section.set_address_size(8);
            section.set_vendor(crate::platform::arch::CFI_VENDOR);
            let translate = arch::unwind_rules::translate;
            cfi::collect(&section, data, &found.bases, found.name, translate)
        }
        _ => {
            let mut section = EhFrame::new(data, LittleEndian);
            section.set_address_size(8);
            section.set_vendor(crate::platform::arch::CFI_VENDOR);
            let translate = arch::unwind_rules::translate;
            cfi::collect(&section, data, &found.bases, found.name, translate)
        }
    }
}

/// Where [`build_eh_frame`] places the section: above the code of the small binaries the seeds come
/// from, so their pc-relative pointers land on positive addresses.
const FUZZ_EH_FRAME_AT: u64 = 1 << 20;

/// Builds a table from the bytes of an `.eh_frame` section alone, as if it were at [`FUZZ_EH_FRAME_AT`]
/// of a binary without `.text` or `.got`: the fuzz target's way into the CFI reader and the assembly.
pub(crate) fn build_eh_frame(data: &[u8]) -> Result<BuiltTable, TableError> {
    if data.len() > MAX_CFI_BYTES {
        return Err(TableError::TooLarge {
            section: ".eh_frame",
            bytes: data.len() as u64,
            limit: MAX_CFI_BYTES as u64,
        });
    }
    let mut section = EhFrame::new(data, LittleEndian);
    section.set_address_size(8);
    section.set_vendor(crate::platform::arch::CFI_VENDOR);
    let bases = gimli::BaseAddresses::default().set_eh_frame(FUZZ_EH_FRAME_AT);
    let collected = cfi::collect(
        &section,
        data,
        &bases,
        ".eh_frame",
        arch::unwind_rules::translate,
    )?;
    if collected.rows.len() > MAX_ROWS {
        return Err(TableError::TooManyRows { limit: MAX_ROWS });
    }
    let rows = assemble::assemble(collected.fdes, &collected.rows);
    let mut stats = assemble::stats(&rows, collected.fde_count, FrameSource::EhFrame);
    stats.bad_fdes = collected.bad_fdes;
    Ok(BuiltTable { rows, stats })
}

/// Builds the unwind table of the ELF file `file`, mapped rather than read so a 100 MB binary costs
/// no heap beyond its rows.
pub(crate) fn build_file(file: &File) -> Result<BuiltTable, TableError> {
    build_with(&map_file(file)?, None)
}

/// The rows of the vDSO where the architecture says its code has one rule and no CFI (arm64): that
/// rule over its whole `.text`, but for its signal trampoline's, in the place of a runtime's rows.
/// None for any other binary.
pub(crate) fn vdso_rows(binary: &Binary) -> Option<Vec<CodeRows>> {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    let rule = arch::VDSO_RULE?;
    if binary.path != crate::process::VDSO_PATH {
        return None;
    }
    let image = map_file(&binary.file).ok()?;
    let file = object::File::parse(&*image).ok()?;
    let text = file.section_by_name(".text")?;
    let start = u32::try_from(text.address()).ok()?;
    let end = u32::try_from(text.address() + text.size()).ok()?;
    let mut rows = vec![UnwindRow { pc: start, ..rule }];
    let trampoline = arch::VDSO_SIGRETURN.and_then(|(name, before)| {
        let symbol = file.dynamic_symbols().find(|s| s.name() == Ok(name))?;
        let at = u32::try_from(symbol.address()).ok()?;
        Some((
            at.checked_sub(before)?.max(start),
            at + symbol.size().max(1) as u32,
        ))
    });
    if let Some((from, to)) = trampoline.filter(|&(from, to)| start <= from && to <= end) {
        let signal = UnwindRow {
            pc: from,
            cfa_offset: 0,
            rbp_offset: 0,
            kind: sonde_abi::unwind::cfa::SIGNAL | sonde_abi::unwind::rbp::SAME,
        };
        rows.retain(|r| r.pc < from);
        rows.push(signal);
        if to < end {
            rows.push(UnwindRow { pc: to, ..rule });
        }
    }
    Some(vec![CodeRows { start, end, rows }])
}

/// Builds the unwind table of `binary`, with `runtime`'s own rows for its code (Go's SP deltas;
/// `runtimes::registry::unwind_rows`).
pub(crate) fn build_binary(
    binary: &Binary,
    runtime: Option<Vec<CodeRows>>,
) -> Result<BuiltTable, TableError> {
    build_with(&map_file(&binary.file)?, runtime)
}

fn map_file(file: &File) -> Result<memmap2::Mmap, TableError> {
    // SAFETY: the map is read-only and dropped before returning. Another process truncating or
    // rewriting the file meanwhile could change or fault the bytes under us; binaries are replaced by
    // rename (package managers, linkers) and a running executable cannot be opened for writing
    // (ETXTBSY), which is the same trust every profiler and debugger places in mapped binaries.
    unsafe { memmap2::Mmap::map(file) }.map_err(|source| TableError::Map { source })
}
