//! The rows the kernel depends on at known places: glibc's signal trampoline, the thread root
//! `_start`, and PLT stubs.

use std::fs::File;

use sonde_abi::unwind::cfa;

use super::build_file;
use super::fixture::{self, row_at};
use super::readelf;

#[test]
fn libc_restore_rt_is_a_signal_frame() {
    let built = build_file(&File::open(fixture::LIBC).expect("open libc")).expect("build");
    // `__restore_rt` is a local symbol of the stripped libc: find it as readelf's FDE whose CIE
    // augmentation has `S`.
    let frames = readelf::frames(fixture::LIBC.as_ref(), ".eh_frame");
    let signal: Vec<_> = frames
        .fdes
        .iter()
        .filter(|fde| frames.cies[&fde.cie].augmentation.contains('S'))
        .collect();
    assert!(
        !signal.is_empty(),
        "readelf shows no signal-frame FDE in libc"
    );
    for fde in signal {
        for address in [fde.start, fde.end - 1] {
            let row = row_at(&built.rows, address);
            assert_eq!(
                row.map(|r| r.cfa_rule()),
                Some(cfa::SIGNAL),
                "libc signal FDE {:#x}..{:#x} at {address:#x}: {row:?}",
                fde.start,
                fde.end
            );
        }
    }
    assert!(built.stats.signal_rows >= 1);
}

#[test]
fn start_is_a_thread_root_and_plt_stubs_have_plt_rows() {
    let dir = fixture::temp_dir();
    let binary = fixture::compile(dir.path(), "frames", fixture::EH_FRAME_FLAGS);
    let built = build_file(&File::open(&binary).expect("open")).expect("build");

    let start = fixture::symbol(&binary, "_start");
    let row = row_at(&built.rows, start);
    assert_eq!(
        row.map(|r| r.cfa_rule()),
        Some(cfa::END),
        "_start at {start:#x}: {row:?}"
    );
    assert!(built.stats.end_rows >= 1);

    let elf = std::fs::read(&binary).expect("read the test binary");
    let plt = fixture::section_ranges(&elf, ".plt");
    let plt = plt
        .first()
        .expect("the test binary has a .plt (it calls libc)");
    // PLT0 (the first 16 bytes) pushes and jumps with its own rows; the stubs follow.
    assert!(plt.end - plt.start > 16, ".plt holds no stub: {plt:x?}");
    for address in [plt.start + 16, plt.end - 1] {
        let row = row_at(&built.rows, address);
        assert!(
            row.is_some_and(|r| r.cfa_rule() == cfa::PLT && r.cfa_offset == 11),
            ".plt stub at {address:#x}: {row:?}"
        );
    }
}

#[test]
fn ibt_plt_stubs_get_the_threshold_binutils_wrote() {
    let dir = fixture::temp_dir();
    let binary = fixture::compile(dir.path(), "frames-ibt", fixture::IBT_PLT_FLAGS);
    let built = build_file(&File::open(&binary).expect("open")).expect("build");
    let elf = std::fs::read(&binary).expect("read the test binary");

    // The IBT stub is `endbr64; push; jmp`, so the push ends at 9: binutils 2.40 writes DW_OP_lit9.
    // Read the threshold from readelf so the test follows the linker.
    let path = binary.to_str().expect("UTF-8 path");
    let dump = fixture::run(
        "readelf",
        &["--debug-dump=no-follow-links", "--debug-dump=frames", path],
    );
    let threshold: u8 = dump
        .lines()
        .find_map(|line| {
            let rest = line.split("DW_OP_lit15; DW_OP_and; DW_OP_lit").nth(1)?;
            rest.split(';').next()?.parse().ok()
        })
        .expect("readelf shows binutils' PLT expression in the IBT binary");
    let expected = match threshold {
        9..=11 => (cfa::PLT, u16::from(threshold)),
        _ => (cfa::UNSUPPORTED, 0),
    };
    let plt = fixture::section_ranges(&elf, ".plt");
    let plt = plt.first().expect("the IBT binary has a .plt");
    let row = row_at(&built.rows, plt.start + 16);
    assert_eq!(
        row.map(|r| (r.cfa_rule(), r.cfa_offset)),
        Some(expected),
        "IBT .plt stub (threshold {threshold}) at {:#x}: {row:?}",
        plt.start + 16
    );

    // The second PLT (`.plt.sec`, `endbr64; jmp *GOT`) pushes nothing: plain CFA = rsp + 8.
    let sec = fixture::section_ranges(&elf, ".plt.sec");
    let sec = sec.first().expect("-z ibtplt makes a .plt.sec");
    let row = row_at(&built.rows, sec.start).expect("a row covers .plt.sec");
    assert_eq!(
        (row.cfa_rule(), row.cfa_offset),
        (cfa::RSP, 8),
        ".plt.sec: {row:?}"
    );
}
