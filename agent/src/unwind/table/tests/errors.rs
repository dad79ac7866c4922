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
        message.contains("only built for x86_64 so far; frame pointers are used for this binary"),
        "{message}"
    );
}

#[test]
fn no_unwind_information() {
    let dir = fixture::temp_dir();
    let binary = fixture::compile(dir.path(), "frames", fixture::EH_FRAME_FLAGS);
    let stripped = dir.path().join("frames-no-cfi");
    fixture::run(
        "objcopy",
        &[
            "--remove-section",
            ".eh_frame",
            "--remove-section",
            ".eh_frame_hdr",
            binary.to_str().expect("UTF-8 path"),
            stripped.to_str().expect("UTF-8 path"),
        ],
    );
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
