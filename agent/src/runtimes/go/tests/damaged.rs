//! Damaged tables: Debian's gofmt with bytes changed in its `.gopclntab` and build info gives
//! errors, or frames without lines or with odd names, never a panic, a hang or a wrong frame.

use object::{Object, ObjectSection};

use super::{GoError, GoTable, buildinfo, elf, gofmt, text_pcs};

/// Debian's gofmt, and where its `.gopclntab` starts and how long it is.
fn gofmt_bytes() -> (Vec<u8>, usize, usize) {
    let bytes = std::fs::read(gofmt()).unwrap();
    let elf = elf(&bytes);
    let section = elf.section_by_name(".gopclntab").unwrap();
    let (offset, size) = section.file_range().unwrap();
    (bytes.clone(), offset as usize, size as usize)
}

fn malformed(r: Result<Option<GoTable>, GoError>) -> bool {
    matches!(r, Err(GoError::Malformed(_)))
}

#[test]
fn malformed_tables_are_errors() {
    let (good, off, size) = gofmt_bytes();
    let with = |at: usize, patch: &[u8]| {
        let mut b = good.clone();
        b[at..at + patch.len()].copy_from_slice(patch);
        GoTable::from_bytes(b)
    };
    let too_old = with(off, &0xfffffffbu32.to_le_bytes());
    assert!(matches!(too_old, Err(GoError::TooOld)));
    let unknown = with(off, &0x12345678u32.to_le_bytes());
    let err = unknown.err().expect("bad magic").to_string();
    assert!(err.contains("0x12345678") && err.contains("Go 1.16 and later"));
    let word = |i: usize, value: u64| with(off + 8 + 8 * i, &value.to_le_bytes());
    assert!(malformed(word(0, 1 << 60)), "huge nfunc");
    assert!(malformed(word(0, 0)), "no functions");
    assert!(malformed(with(off + 7, &[4])), "32-bit pointers");
    assert!(
        (3..8).all(|i| malformed(word(i, u64::MAX))),
        "sub-table offsets"
    );
    // The section shrunk to less than its header, then running past the end of the file.
    let shoff = u64::from_le_bytes(good[0x28..0x30].try_into().unwrap()) as usize;
    let header = |name: &str| shoff + 64 * elf(&good).section_by_name(name).unwrap().index().0;
    let sh_size = header(".gopclntab") + 0x20;
    assert!(malformed(with(sh_size, &64u64.to_le_bytes())));
    assert!(malformed(with(sh_size, &(100 * size as u64).to_le_bytes())));
    assert!(GoTable::from_bytes(good[..off + size / 2].to_vec()).is_err());
    // Where moduledata is searched for, a section at the very top of the address space.
    let top = with(header(".noptrdata") + 0x10, &(u64::MAX - 8).to_le_bytes());
    assert!(top.expect("names need no moduledata").is_some());
    let script = GoTable::from_bytes(b"#!/bin/sh\n".to_vec());
    assert!(matches!(script, Err(GoError::NotElf)));
    let rust = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(GoTable::from_bytes(rust.clone()).unwrap().is_none(), "Rust");
    assert_eq!(buildinfo::read(&rust), None);
}

#[test]
fn bogus_pc_tables_give_no_lines() {
    let (mut bytes, off, _) = gofmt_bytes();
    let word = |i: usize| u64::from_le_bytes(bytes[off + 8 + 8 * i..][..8].try_into().unwrap());
    let (pctab, functab) = (off + word(6) as usize, off + word(7) as usize);
    bytes[pctab..functab].fill(0xff);
    let t = GoTable::from_bytes(bytes).unwrap().unwrap();
    for pc in text_pcs(&gofmt(), 101) {
        if let Some(chain) = t.frames(pc) {
            assert_eq!(chain.len(), 1, "no inline index can be read");
            assert_eq!((chain[0].file.as_deref(), chain[0].line), (None, None));
        }
    }
}

/// Random byte flips in the table and the build info: errors or odd names, never a panic or hang.
#[test]
fn flipped_bytes_never_panic() {
    let (good, off, size) = gofmt_bytes();
    let pcs = text_pcs(&gofmt(), 4099);
    let build_info = good.windows(14).position(|w| w == b"\xff Go buildinf:");
    let build_info = build_info.expect("build info");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed as usize
    };
    // The section headers, at the end of Go binaries.
    let headers = u64::from_le_bytes(good[0x28..0x30].try_into().unwrap()) as usize;
    for round in 0..300 {
        let mut bytes = good.clone();
        for _ in 0..1 + next() % 16 {
            // Half the flips in the header and function table, where they matter most.
            let at = next() % if next() % 2 == 0 { 4096 } else { size };
            bytes[off + at] ^= 1 << (next() % 8);
            bytes[build_info + next() % 64] ^= 1 << (next() % 8);
        }
        if round % 3 == 0 {
            let at = headers + next() % (good.len() - headers);
            bytes[at] ^= 1 << (next() % 8);
        }
        let _ = buildinfo::read(&bytes);
        let Ok(Some(t)) = GoTable::from_bytes(bytes) else {
            continue;
        };
        for &pc in &pcs {
            let chain = t.frames(pc + round as u64);
            assert!(chain.is_none_or(|c| !c.is_empty() && c.len() <= 33));
        }
    }
}
