//! Checks a built table against readelf's interpretation of the same CFI: every row of every FDE,
//! the gaps between FDEs and the FDE count. Tests for libc, the C test binary (`.eh_frame` and
//! `.debug_frame`, plain and compressed) and the vDSO.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;

use sonde_abi::UnwindRow;
use sonde_abi::unwind::{cfa, rbp};

use super::fixture::{self, row_at};
use super::readelf::{self, Fde, Row};
use super::{BuiltTable, FrameSource, build, build_file};

/// What a comparison covered.
#[derive(Debug, Default)]
struct Checked {
    /// readelf rows compared.
    rows: usize,
    /// Gaps between FDEs checked for `NO_INFO`.
    gaps: usize,
    /// Of those, the gap of the ELF entry point, checked for `END` instead.
    entry_gaps: usize,
    /// readelf rows not compared because a later-starting FDE overrides them.
    overridden: usize,
    /// readelf rows whose expected rule is `UNSUPPORTED`, by readelf's CFA / ra text.
    unsupported: BTreeMap<String, usize>,
}

/// Compares `built`, the table of `binary`, with readelf's dump of `section`; panics listing the
/// mismatches.
fn compare(binary: &Path, built: &BuiltTable, section: &str) -> Checked {
    let frames = readelf::frames(binary, section);
    assert_eq!(
        built.stats.fdes,
        frames.fdes.len() as u64,
        "FDE count of {section} in {}: built table vs readelf",
        binary.display()
    );
    let elf = std::fs::read(binary).expect("read the binary");
    let plt = fixture::section_ranges(&elf, ".plt");
    let rows = &built.rows;
    assert!(
        rows.windows(2)
            .all(|w| w[0].pc < w[1].pc && !same_rule(&w[0], &w[1])),
        "rows must have strictly increasing pcs and no equal neighbours"
    );

    // The builder's order: by start, and of equal starts the later in the section wins.
    let mut order: Vec<&Fde> = frames.fdes.iter().filter(|f| f.end > f.start).collect();
    order.sort_by_key(|f| f.start);
    let owner = |loc: u64| {
        let i = order.partition_point(|f| f.start <= loc);
        order[i - 1].offset
    };

    let mut checked = Checked::default();
    let mut mismatches = Vec::new();
    for fde in &order {
        let cie = &frames.cies[&fde.cie];
        let signal = cie.augmentation.contains('S');
        let printed = if fde.rows.is_empty() {
            // No instructions: the CIE's initial rules, from the FDE's start.
            let mut initial = cie
                .rows
                .last()
                .expect("a CIE prints its initial rules")
                .clone();
            initial.loc = fde.start;
            vec![initial]
        } else {
            fde.rows.clone()
        };
        for (i, row) in printed.iter().enumerate() {
            // Of rows printed at the same LOC, the last is in effect.
            let superseded = printed.get(i + 1).is_some_and(|next| next.loc == row.loc);
            if superseded || row.loc < fde.start || row.loc >= fde.end {
                continue;
            }
            if owner(row.loc) != fde.offset {
                checked.overridden += 1;
                continue;
            }
            let expected = expect(row, signal, plt.iter().any(|r| r.contains(&row.loc)));
            if expected.cfa_rule() == cfa::UNSUPPORTED {
                let why = format!("CFA {} ra {}", row.cfa, row.ra.as_deref().unwrap_or("-"));
                *checked.unsupported.entry(why).or_default() += 1;
            }
            let actual = row_at(rows, row.loc);
            if !actual.is_some_and(|actual| matches(&expected, &actual)) {
                mismatches.push(format!(
                    "FDE {:#x} pc={:#x}..{:#x} LOC {:#x}: readelf CFA {} rbp {} ra {} -> expected {}, table has {}",
                    fde.offset,
                    fde.start,
                    fde.end,
                    row.loc,
                    row.cfa,
                    row.rbp.as_deref().unwrap_or("-"),
                    row.ra.as_deref().unwrap_or("-"),
                    describe(&expected),
                    actual.map_or("no row".to_string(), |a| format!("{} (row at {:#x})", describe(&a), a.pc)),
                ));
            }
            checked.rows += 1;
        }
    }

    // A short gap holding the ELF entry point is entry code without CFI: a thread root.
    let entry = object::Object::entry(&object::File::parse(elf.as_slice()).expect("parse the ELF"));
    for gap in gaps(&order) {
        checked.gaps += 1;
        let expected = if gap.contains(&entry) && gap.end - gap.start <= 256 {
            checked.entry_gaps += 1;
            cfa::END
        } else {
            cfa::NO_INFO
        };
        let ends = [Some(gap.start), (gap.end != u64::MAX).then(|| gap.end - 1)];
        for address in ends.into_iter().flatten() {
            let actual = row_at(rows, address);
            if actual.is_none_or(|a| a.cfa_rule() != expected) {
                mismatches.push(format!(
                    "gap {:#x}..{:#x} between FDEs, address {address:#x}: expected rule {expected}, table has {}",
                    gap.start,
                    gap.end,
                    actual.map_or("no row".to_string(), |a| describe(&a)),
                ));
            }
        }
    }

    assert!(
        mismatches.is_empty(),
        "{} mismatches between the table of {} and readelf's {section} (first 30):\n{}",
        mismatches.len(),
        binary.display(),
        mismatches
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!("{}: {checked:?}, {:?}", binary.display(), built.stats);
    checked
}

/// The row readelf's row calls for. readelf prints every expression as `exp`: one in a PLT section is
/// expected as `PLT` with any of binutils' thresholds (the landmark tests check the threshold).
fn expect(row: &Row, signal: bool, in_plt: bool) -> UnwindRow {
    let only = |rule: u8| UnwindRow {
        pc: 0,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: rule | rbp::SAME,
    };
    if signal {
        return only(cfa::SIGNAL);
    }
    let ra_in_rdi = match row.ra.as_deref() {
        Some("u") => return only(cfa::END),
        Some("c-8") => false,
        Some("r5 (rdi)") => true,
        _ => return only(cfa::UNSUPPORTED),
    };
    let (cfa_rule, cfa_offset) = if row.cfa == "exp" && in_plt && !ra_in_rdi {
        (cfa::PLT, 0)
    } else if let Some((rule, offset)) = register_offset(&row.cfa) {
        let rule = match (rule, ra_in_rdi) {
            (cfa::RSP, true) => cfa::RA_IN_RDI,
            (rule, false) => rule,
            _ => return only(cfa::UNSUPPORTED),
        };
        match u16::try_from(offset) {
            Ok(offset) => (rule, offset),
            Err(_) => return only(cfa::UNSUPPORTED),
        }
    } else {
        return only(cfa::UNSUPPORTED);
    };
    let (rbp_rule, rbp_offset) = match row.rbp.as_deref() {
        None | Some("u" | "s") => (rbp::SAME, 0),
        Some(saved) => match saved.strip_prefix('c').and_then(|n| n.parse::<i64>().ok()) {
            Some(n) if n % 8 == 0 && i8::try_from(n / 8).is_ok() => (rbp::AT_CFA, (n / 8) as i8),
            _ => (rbp::LOST, 0),
        },
    };
    UnwindRow {
        pc: 0,
        cfa_offset,
        rbp_offset,
        kind: cfa_rule | rbp_rule,
    }
}

/// `rsp+N` / `rbp+N` / `rbx+N` as (CFA rule, N).
fn register_offset(text: &str) -> Option<(u8, i64)> {
    let (rule, offset) = [("rsp", cfa::RSP), ("rbp", cfa::RBP), ("rbx", cfa::RBX)]
        .iter()
        .find_map(|(name, rule)| Some((*rule, text.strip_prefix(name)?)))?;
    Some((rule, offset.parse().ok()?))
}

fn matches(expected: &UnwindRow, actual: &UnwindRow) -> bool {
    if expected.cfa_rule() == cfa::PLT {
        let plt = actual.cfa_rule() == cfa::PLT && (9..=11).contains(&actual.cfa_offset);
        return plt
            && expected.rbp_rule() == actual.rbp_rule()
            && expected.rbp_offset == actual.rbp_offset;
    }
    same_rule(expected, actual)
}

fn same_rule(a: &UnwindRow, b: &UnwindRow) -> bool {
    (a.kind, a.cfa_offset, a.rbp_offset) == (b.kind, b.cfa_offset, b.rbp_offset)
}

/// A row's rule in readable form, for messages.
fn describe(row: &UnwindRow) -> String {
    let cfa = match row.cfa_rule() {
        cfa::RSP => format!("CFA rsp+{}", row.cfa_offset),
        cfa::RBP => format!("CFA rbp+{}", row.cfa_offset),
        cfa::RBX => format!("CFA rbx+{} (leaf)", row.cfa_offset),
        cfa::RA_IN_RDI => format!("CFA rsp+{}, ra in rdi (leaf)", row.cfa_offset),
        cfa::PLT => format!("PLT threshold {}", row.cfa_offset),
        cfa::END => "END".to_string(),
        cfa::SIGNAL => "SIGNAL".to_string(),
        cfa::NO_INFO => "NO_INFO".to_string(),
        cfa::UNSUPPORTED => "UNSUPPORTED".to_string(),
        other => format!("cfa rule {other}"),
    };
    let rbp = match row.rbp_rule() {
        rbp::SAME => "rbp same".to_string(),
        rbp::AT_CFA => format!("rbp at CFA{:+}", i64::from(row.rbp_offset) * 8),
        rbp::LOST => "rbp lost".to_string(),
        other => format!("rbp rule {other:#x}"),
    };
    format!("{cfa}, {rbp}")
}

/// Address ranges covered by no FDE, from the end of the first FDE on; the last runs to `u64::MAX`.
fn gaps(order: &[&Fde]) -> Vec<Range<u64>> {
    let mut gaps = Vec::new();
    let mut covered_to: Option<u64> = None;
    for fde in order {
        if let Some(end) = covered_to
            && fde.start > end
        {
            gaps.push(end..fde.start);
        }
        covered_to = Some(covered_to.map_or(fde.end, |end| end.max(fde.end)));
    }
    gaps.extend(covered_to.map(|end| end..u64::MAX));
    gaps
}

#[test]
fn libc_matches_readelf() {
    let file = File::open(fixture::LIBC).expect("open libc");
    let built = build_file(&file).expect("build libc's table");
    assert_eq!(built.stats.source, FrameSource::EhFrame);
    assert_eq!(built.stats.rows, built.rows.len() as u64);
    let checked = compare(Path::new(fixture::LIBC), &built, ".eh_frame");
    assert!(
        checked.rows > 10_000,
        "only {} readelf rows compared",
        checked.rows
    );
    assert!(checked.gaps > 0, "libc has gaps between FDEs");
}

#[test]
fn ld_so_matches_readelf_with_its_leaf_register_rules() {
    let built = build_file(&File::open(fixture::LD_SO).expect("open ld.so")).expect("build ld.so");
    let checked = compare(Path::new(fixture::LD_SO), &built, ".eh_frame");
    assert!(
        checked.rows > 1_000,
        "only {} readelf rows compared",
        checked.rows
    );
    // `_start` and `_dl_start_user`: assembly without CFI, where every process starts.
    assert_eq!(
        checked.entry_gaps, 1,
        "ld.so's entry point is not in a CFI gap"
    );
    // The lazy-binding trampolines (`_dl_runtime_resolve_*`): a CFA from rbx.
    assert!(
        built.rows.iter().any(|r| r.cfa_rule() == cfa::RBX),
        "no rbx-based CFA row in ld.so"
    );
    // And libc's `vfork`: the return address in rdi.
    let libc = build_file(&File::open(fixture::LIBC).expect("open libc")).expect("build libc");
    let vfork = fixture::dynamic_symbol(Path::new(fixture::LIBC), "vfork");
    let row = fixture::row_at(&libc.rows, vfork + 1);
    assert_eq!(
        row.map(|r| (r.cfa_rule(), r.cfa_offset)),
        Some((cfa::RA_IN_RDI, 0)),
        "libc vfork+1: {row:?}"
    );
}

#[test]
fn test_binary_matches_readelf() {
    let dir = fixture::temp_dir();
    let binary = fixture::compile(dir.path(), "frames", fixture::EH_FRAME_FLAGS);
    let built = build_file(&File::open(&binary).expect("open the test binary")).expect("build");
    assert_eq!(built.stats.source, FrameSource::EhFrame);
    let checked = compare(&binary, &built, ".eh_frame");
    // What frames.c is there to exercise.
    let rules: Vec<u8> = built.rows.iter().map(UnwindRow::cfa_rule).collect();
    for (rule, name) in [
        (cfa::RBP, "RBP (vla, with_alloca)"),
        (cfa::UNSUPPORTED, "UNSUPPORTED (huge_frame)"),
        (cfa::END, "END (_start)"),
        (cfa::NO_INFO, "NO_INFO"),
    ] {
        assert!(
            rules.contains(&rule),
            "no {name} row in the test binary's table"
        );
    }
    assert!(
        built.stats.plt_rows > 0,
        "no PLT row in the test binary's table"
    );
    assert!(
        built
            .rows
            .iter()
            .any(|r| r.rbp_rule() == rbp::AT_CFA && r.cfa_rule() == cfa::RSP),
        "no row with rbp saved and the CFA from rsp (many_regs)"
    );
    assert!(
        built
            .rows
            .iter()
            .any(|r| r.cfa_rule() == cfa::RSP && r.cfa_offset > 8192),
        "no row with big_frame's 8 KiB CFA offset"
    );
    assert!(
        checked
            .unsupported
            .keys()
            .any(|why| why.starts_with("CFA rsp+")),
        "huge_frame's CFA offset above 64 KiB is not among the unsupported rows: {:?}",
        checked.unsupported
    );
}

#[test]
fn debug_frame_binary_matches_readelf_compressed_or_not() {
    let dir = fixture::temp_dir();
    let mut tables = Vec::new();
    for (name, compress) in [("frames-dbg", None), ("frames-gz", Some("-gz=zlib"))] {
        let mut flags = fixture::DEBUG_FRAME_FLAGS.to_vec();
        flags.extend(compress);
        let compiled = fixture::compile(dir.path(), name, &flags);
        // crt1.o's `_start` and the linker's PLT bring a small `.eh_frame` even without unwind
        // tables; without it `.debug_frame` is used.
        let binary = dir.path().join(format!("{name}-no-eh"));
        fixture::without_eh_frame(&compiled, &binary);
        let elf = std::fs::read(&binary).expect("read the binary");
        assert!(
            !fixture::has_section(&elf, ".eh_frame"),
            "{name}: .eh_frame left"
        );
        assert!(
            fixture::has_section(&elf, ".debug_frame"),
            "{name}: gcc -g wrote no .debug_frame"
        );
        assert_eq!(
            compressed(&elf, ".debug_frame"),
            compress.is_some(),
            "{name}: SHF_COMPRESSED"
        );
        let built = build(&elf).expect("build from .debug_frame");
        assert_eq!(built.stats.source, FrameSource::DebugFrame);
        compare(&binary, &built, ".debug_frame");
        tables.push(built.rows);
    }
    assert_eq!(tables[0], tables[1], "-gz changed the table");
}

#[test]
fn vdso_matches_readelf() {
    let image = vdso_image();
    let built = build(&image).expect("build the vDSO's table");
    assert_eq!(built.stats.source, FrameSource::EhFrame);
    let dir = fixture::temp_dir();
    let path = dir.path().join("vdso.so");
    std::fs::write(&path, &image).expect("write the vDSO image");
    compare(&path, &built, ".eh_frame");
}

/// The vDSO of this process, read from its mapping.
fn vdso_image() -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let line = maps
        .lines()
        .find(|line| line.ends_with("[vdso]"))
        .expect("this process has a [vdso] mapping");
    let range = line
        .split_whitespace()
        .next()
        .expect("maps line has a range");
    let (start, end) = range.split_once('-').expect("maps range is start-end");
    let start = u64::from_str_radix(start, 16).expect("hex start");
    let end = u64::from_str_radix(end, 16).expect("hex end");
    let mem = File::open("/proc/self/mem").expect("open /proc/self/mem");
    let mut image = vec![0; (end - start) as usize];
    mem.read_exact_at(&mut image, start)
        .expect("read the vDSO from /proc/self/mem");
    image
}

/// Whether section `name` of `elf` has `SHF_COMPRESSED`.
fn compressed(elf: &[u8], name: &str) -> bool {
    use object::{Object, ObjectSection, SectionFlags};
    let file = object::File::parse(elf).expect("parse the binary");
    let section = file.section_by_name(name).expect("section exists");
    match section.flags() {
        SectionFlags::Elf { sh_flags } => sh_flags & u64::from(object::elf::SHF_COMPRESSED) != 0,
        _ => false,
    }
}
