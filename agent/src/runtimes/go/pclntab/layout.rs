//! Where a binary's `.gopclntab` is and how it is laid out: the section, or the symbol or the
//! moduledata an external linker left when it folded the table into `.data.rel.ro`.

use object::elf::{SHF_ALLOC, SHT_NOBITS, SHT_RELA};
use object::read::elf::{ElfFile64, ElfSection64, FileHeader, SectionHeader};
use object::{LittleEndian as LE, Object, ObjectSection, ObjectSymbol};

use super::*;

pub(super) fn layout(data: &[u8]) -> Result<Option<Layout>, GoError> {
    match object::FileKind::parse(data) {
        Ok(object::FileKind::Elf64) if data.get(5) == Some(&1) => {}
        Ok(object::FileKind::Elf64) => return Err(GoError::UnsupportedElf("big-endian ELF")),
        Ok(object::FileKind::Elf32) => return Err(GoError::UnsupportedElf("32-bit ELF")),
        _ => return Err(GoError::NotElf),
    }
    let elf = ElfFile64::<LE>::parse(data).map_err(GoError::Elf)?;
    let alloc = |s: &ElfSection64<'_, '_, LE>| {
        let h = s.elf_section_header();
        h.sh_flags(LE) & u64::from(SHF_ALLOC) != 0 && h.sh_type(LE) != SHT_NOBITS
    };
    let sections = elf.sections().filter(alloc);
    let regions = sections.filter_map(|s| Region::of(&s, data.len()));
    let loaded: Vec<Region> = regions.filter(|r| r.size > 0 && r.addr != 0).collect();
    let mut first_err = None;
    for pcln in pclntab_candidates(&elf, data)? {
        match table_layout(&elf, data, pcln, &loaded) {
            Ok(l) => return Ok(Some(Layout { loaded, ..l })),
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    first_err.map_or(Ok(None), Err)
}

/// The `.gopclntab` section; or, in an externally linked PIE where the system linker merged it
/// into `.data.rel.ro`, the headers found there (only in files that look like Go).
fn pclntab_candidates(elf: &ElfFile64<'_, LE>, data: &[u8]) -> Result<Vec<Region>, GoError> {
    for name in [".gopclntab", ".data.rel.ro.gopclntab"] {
        if let Some(s) = elf.section_by_name(name) {
            let outside = GoError::Malformed("the section lies outside the file");
            return Region::of(&s, data.len()).map(|r| vec![r]).ok_or(outside);
        }
    }
    let go = elf.section_by_name(".go.buildinfo").is_some();
    let relro = section(elf, ".data.rel.ro", data.len()).filter(|_| go);
    let Some(relro) = relro else {
        return Ok(Vec::new());
    };
    let bytes = relro.bytes(data);
    let header = |&o: &usize| {
        let magic = matches!(u32_at(bytes, o), Some(0xfffffffa | 0xfffffff0 | 0xfffffff1));
        magic && bytes[o + 4..o + 8] == [0, 0, bytes[o + 6], 8]
    };
    let found = (0..relro.size.saturating_sub(8)).step_by(8).filter(header);
    let at = |o| Region {
        addr: relro.addr + o as u64,
        offset: relro.offset + o,
        size: relro.size - o,
    };
    Ok(found.take(MAX_CANDIDATES).map(at).collect())
}

fn table_layout(
    elf: &ElfFile64<'_, LE>,
    data: &[u8],
    pcln: Region,
    loaded: &[Region],
) -> Result<Layout, GoError> {
    let (t, bad) = (pcln.bytes(data), GoError::Malformed);
    let version = match u32_at(t, 0).ok_or(bad("the header is truncated"))? {
        0xfffffffa => Version::V116,
        0xfffffff0 => Version::V118,
        0xfffffff1 => Version::V120,
        0xfffffffb => return Err(GoError::TooOld),
        m => return Err(GoError::UnknownMagic(m)),
    };
    let h = array::<8>(t, 0).unwrap_or_default();
    if h[4..6] != [0, 0] || !matches!(h[6], 1 | 2 | 4) || h[7] != 8 {
        return Err(bad(
            "the header has bad padding, pc quantum or pointer size",
        ));
    }
    // nfunc, nfiles, [textStart,] then the offsets of the five sub-tables.
    let n = if version == Version::V116 { 7 } else { 8 };
    let w: Vec<u64> = (0..n).map_while(|i| u64_at(t, 8 + 8 * i)).collect();
    let tabs: Vec<usize> = w.iter().skip(n - 5).map(|&o| o as usize).collect();
    if tabs.len() != 5 || tabs.iter().any(|&o| o > t.len()) {
        return Err(bad("the header is truncated or points outside the section"));
    }
    let (funcnametab, cutab, filetab, pctab, functab) =
        (tabs[0], tabs[1], tabs[2], tabs[3], tabs[4]);
    // nfunc (entry, funcoff) pairs and the end pc.
    let field = if version == Version::V116 { 8 } else { 4 };
    let fits = |&n: &usize| n > 0 && n <= ((t.len() - functab) / field).saturating_sub(1) / 2;
    let nfunc = usize::try_from(w[0]).ok().filter(fits);
    let nfunc = nfunc.ok_or(bad("the function count does not fit in the section"))?;

    let (mut text_start, mut gofunc) = (0, None);
    if version != Version::V116 {
        let mut symbols = elf.symbols();
        let symbol = symbols.find(|s| matches!(s.name(), Ok("go:func.*" | "go.func.*")));
        let need = symbol.is_none() || w[2] == 0;
        let md = need.then(|| find_moduledata(elf, data, version, pcln, &w, loaded));
        let md = md.flatten();
        // pcHeader.textStart, unless left to the loader (PIE): then moduledata.text or, as
        // `go tool addr2line` does, the start of .text.
        let text = elf.section_by_name(".text").map(|s| s.address());
        let mut starts = [Some(w[2]), md.map(|m| m.0), text].into_iter().flatten();
        text_start = starts.find(|&a| a != 0).ok_or(bad("no text address"))?;
        let mapped = |g: &u64| loaded.iter().any(|r| r.offset_of(*g, 1).is_some());
        let by_symbol = symbol.map(|s| s.address());
        gofunc = by_symbol.or(md.map(|m| m.1)).filter(mapped);
    }
    let entry = |i| entry_at(t, version, functab, text_start, i);
    if entry(0).zip(entry(nfunc)).is_none_or(|(a, b)| a >= b) {
        return Err(bad("the function table is empty or unsorted"));
    }
    let quantum = u64::from(t[6]);
    Ok(Layout {
        version,
        quantum,
        nfunc,
        text_start,
        pcln,
        funcnametab,
        cutab,
        filetab,
        pctab,
        functab,
        gofunc,
        loaded: Vec::new(),
    })
}

/// `runtime.firstmoduledata` of a stripped Go 1.18+ binary: (text, gofunc). Found by its first
/// word, the pcHeader pointer, read raw or, where a system linker left it zero for the loader,
/// from a RELATIVE relocation; accepted only when its table pointers and pc bounds agree with the
/// pclntab's.
fn find_moduledata(
    elf: &ElfFile64<'_, LE>,
    data: &[u8],
    v: Version,
    pcln: Region,
    hdr: &[u64],
    loaded: &[Region],
) -> Option<(u64, u64)> {
    let machine = elf.elf_header().e_machine(LE);
    let relative =
        u64::from(crate::platform::arch::elf_relative_relocation(machine).unwrap_or(u32::MAX));
    // (r_offset, addend) of every RELATIVE relocation, without collecting them.
    let relocs = || {
        let rela = |s: &ElfSection64<'_, '_, LE>| s.elf_section_header().sh_type(LE) == SHT_RELA;
        let tables = elf.sections().filter(rela).filter_map(|s| s.data().ok());
        let entry = |r: &[u8]| Some((u64_at(r, 0)?, u64_at(r, 8)?, u64_at(r, 16)?));
        let entries = tables.flat_map(|d| d.chunks_exact(24)).filter_map(entry);
        entries.filter(move |e| e.1 == relative).map(|e| (e.0, e.2))
    };
    let mut candidates = Vec::new();
    // Go 1.26 gives moduledata a section of its own.
    let sections = [".go.module", ".noptrdata", ".data.rel.ro", ".data"];
    let sections = sections.map(|n| section(elf, n, data.len()));
    for r in sections.into_iter().flatten() {
        let words = r.bytes(data).chunks_exact(8).enumerate();
        let hits = words.filter(|(_, w)| **w == pcln.addr.to_le_bytes());
        let hits = hits.map(|(i, _)| r.addr + 8 * i as u64);
        candidates.extend(hits.take(MAX_CANDIDATES));
    }
    let by_reloc = relocs().filter(|r| r.1 == pcln.addr).map(|r| r.0);
    candidates.extend(by_reloc.take(MAX_CANDIDATES));
    candidates.truncate(MAX_CANDIDATES);

    let (t, functab) = (pcln.bytes(data), usize::try_from(hdr[7]).ok()?);
    let first = entry_at(t, v, functab, 0, 0)?;
    let end = entry_at(t, v, functab, 0, usize::try_from(hdr[0]).ok()?)?;
    // gofunc follows rodata: word 38 in Go 1.18-1.19, 40 in 1.20-1.26, 43 from 1.27 (which keeps
    // types and funcs in `.go.type` and `.go.func` sections, and their bounds before rodata).
    let gofunc_at: &[usize] = if v == Version::V120 { &[40, 43] } else { &[38] };
    candidates.into_iter().find_map(|md| {
        let size = 8 * MODULEDATA_WORDS;
        let at = loaded.iter().find_map(|r| r.offset_of(md, size))?;
        let word = |i| u64_at(data, at + 8 * i).unwrap_or(0);
        let mut w: [u64; MODULEDATA_WORDS] = std::array::from_fn(word);
        let inside = |at: u64| at.wrapping_sub(md) < 8 * MODULEDATA_WORDS as u64;
        for (at, addend) in relocs().filter(|&(at, _)| inside(at)) {
            w[(at - md) as usize / 8] = addend;
        }
        let (base, text) = (pcln.addr, w[22]);
        let ok = w[0] == base
            && Some(w[1]) == base.checked_add(hdr[3])
            && Some(w[16]) == base.checked_add(hdr[7])
            && Some(w[17]) == hdr[0].checked_add(1)
            && Some(w[20]) == text.checked_add(first)
            && Some(w[21]) == text.checked_add(end);
        // gofunc lies within rodata, the word before it (in 1.27 word 40 is a length, below the
        // address before it; a system linker may put C's rodata first, so not rodata's start).
        let gofunc = gofunc_at.iter().copied().find(|&i| w[i - 1] <= w[i])?;
        ok.then_some((text, w[gofunc]))
    })
}

fn section(elf: &ElfFile64<'_, LE>, name: &str, file_len: usize) -> Option<Region> {
    Region::of(&elf.section_by_name(name)?, file_len)
}
