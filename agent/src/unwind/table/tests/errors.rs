//! Each way a binary gets no table maps to its own error, with a message that says frame pointers
//! take over.

use std::fs::File;

use super::fixture;
use super::{TableError, build, build_file};

#[test]
fn not_an_elf_file() {
    for bytes in [&b""[..], b"#!/bin/sh\necho not an ELF file\n", b"\x7fELF"] {
        let error = build(bytes).expect_err("not an ELF image");
        assert!(
            matches!(error, TableError::NotElf { .. }),
            "{bytes:?}: {error:?}"
        );
        assert!(
            error.to_string().contains("frame pointers are used"),
            "{error}"
        );
    }
}

#[test]
fn another_architecture() {
    let dir = fixture::temp_dir();
    let binary = fixture::compile(dir.path(), "frames", fixture::EH_FRAME_FLAGS);
    let mut elf = std::fs::read(&binary).expect("read the test binary");
    // e_machine: 2 bytes at offset 18 of the ELF header; EM_AARCH64 = 183.
    elf[18..20].copy_from_slice(&183u16.to_le_bytes());
    let error = build(&elf).expect_err("an aarch64 header");
    let TableError::UnsupportedArch { machine } = &error else {
        panic!("expected UnsupportedArch, got {error:?}");
    };
    assert!(
        machine.contains("aarch64") && machine.contains("183"),
        "{machine}"
    );
    let message = error.to_string();
    assert!(
        message.contains("only built for x86_64 binaries; frame pointers are used for this binary"),
        "{message}"
    );
}

#[test]
fn no_unwind_information() {
    let dir = fixture::temp_dir();
    let binary = fixture::compile(dir.path(), "frames", fixture::EH_FRAME_FLAGS);
    let stripped = dir.path().join("frames-no-cfi");
    fixture::without_eh_frame(&binary, &stripped);
    let elf = std::fs::read(&stripped).expect("read the stripped binary");
    for section in [".eh_frame", ".debug_frame"] {
        assert!(
            !fixture::has_section(&elf, section),
            "{section} is still there"
        );
    }
    let error = build_file(&File::open(&stripped).expect("open")).expect_err("no CFI");
    assert!(matches!(error, TableError::NoUnwindInfo), "{error:?}");
}

/// A function whose CFI gimli rejects (a `DW_CFA_restore_state` with nothing remembered, written raw
/// with `.cfi_escape` because gas refuses the directive; libgcrypt's assembly has FDEs gimli rejects
/// too) costs that function its rows, not the whole binary its table.
#[test]
fn an_unreadable_fde_costs_only_its_own_function() {
    const SOURCE: &str = r#"
__attribute__((noinline)) int ordinary(int x) { return x * 3 + 1; }
__asm__(
    ".globl broken\n.type broken,@function\nbroken:\n.cfi_startproc\n"
    "nop\n.cfi_escape 0x0b\nnop\nret\n.cfi_endproc\n.size broken, .-broken\n");
int broken(void);
int main(int argc, char **argv) { (void)argv; return ordinary(argc) + broken(); }
"#;
    let dir = fixture::temp_dir();
    let source = dir.path().join("broken_cfi.c");
    std::fs::write(&source, SOURCE).expect("write the C source");
    let binary = dir.path().join("broken_cfi");
    fixture::run(
        "gcc",
        &[
            "-O2",
            "-fomit-frame-pointer",
            "-o",
            binary.to_str().expect("UTF-8 temp path"),
            source.to_str().expect("UTF-8 temp path"),
        ],
    );
    let built =
        build_file(&File::open(&binary).expect("open")).expect("a table despite one bad FDE");
    assert_eq!(built.stats.bad_fdes, 1, "{:?}", built.stats);
    let broken = fixture::symbol(&binary, "broken");
    let row = fixture::row_at(&built.rows, broken + 1).expect("a row covers broken");
    assert_eq!(
        row.cfa_rule(),
        sonde_abi::unwind::cfa::UNSUPPORTED,
        "{row:?}"
    );
    let ordinary = fixture::symbol(&binary, "ordinary");
    let row = fixture::row_at(&built.rows, ordinary).expect("a row covers ordinary");
    assert_eq!(
        (row.cfa_rule(), row.cfa_offset),
        (sonde_abi::unwind::cfa::RSP, 8),
        "{row:?}"
    );
}

#[test]
fn call_frame_information_past_the_bound_is_refused_before_it_is_read() {
    // Zero-filled: gimli would read it as an endless run of terminators, had it been read at all.
    let huge = vec![0u8; super::super::MAX_CFI_BYTES + 1];
    let error = super::super::build_eh_frame(&huge).expect_err("over the bound");
    assert!(matches!(error, TableError::TooLarge { .. }), "{error:?}");
    assert!(
        error.to_string().contains("frame pointers are used"),
        "{error}"
    );
}
