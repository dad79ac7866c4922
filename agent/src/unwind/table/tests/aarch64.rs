//! The AArch64 rules (`platform::arch::aarch64::unwind_rules`), checked on any host against Debian's
//! arm64 C library and loader (`libc6-arm64-cross`, which `cargo xtask setup --peers` installs): what
//! the kernel's AArch64 walk gets for every address of them. The VM test walks with the same rules
//! on Debian's arm64 kernels.

use std::collections::BTreeMap;

use gimli::{EhFrame, LittleEndian};
use sonde_abi::{
    UnwindRow,
    unwind::{cfa, rbp},
};

use super::super::{assemble, cfi, elf};
use crate::platform::arch::aarch64::{CFI_VENDOR, unwind_rules::translate};

/// Debian's arm64 libc and loader, as the cross toolchain ships them.
const LIBC: &str = "/usr/aarch64-linux-gnu/lib/libc.so.6";
const LD_SO: &str = "/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1";

/// The rows of the arm64 binary at `path` by the AArch64 rules, and the FDEs gimli refused.
fn rows(path: &str) -> (Vec<UnwindRow>, u64) {
    let data = std::fs::read(path).unwrap_or_else(|e| {
        panic!("{path}: {e}: `cargo xtask setup --peers` installs Debian's libc6-arm64-cross")
    });
    let file = elf::Elf::parse(&*data).expect("an ELF64 file");
    let found = elf::find_cfi(&file).expect("CFI");
    let mut section = EhFrame::new(&found.data, LittleEndian);
    section.set_address_size(8);
    section.set_vendor(CFI_VENDOR);
    let collected = cfi::collect(&section, &found.data, &found.bases, found.name, translate)
        .expect("the CFI reads");
    let bad = collected.bad_fdes;
    (assemble::assemble(collected.fdes, &collected.rows), bad)
}

/// How many rows have each rule, by name.
fn by_rule(rows: &[UnwindRow]) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        let name = match (row.cfa_rule(), row.rbp_rule()) {
            (cfa::END, _) => "end",
            (cfa::UNSUPPORTED, _) => "unsupported",
            (cfa::NO_INFO, _) => "no info",
            (_, rbp::AT_CFA | rbp::RECORD_AT_BOTTOM) => "frame record saved",
            (_, rbp::RA_AT_CFA | rbp::LOST_RA_AT_CFA) => "return address saved alone",
            (_, rbp::SAME | rbp::LOST) => "return address in x30",
            _ => "other",
        };
        *counts.entry(name).or_default() += 1;
    }
    counts
}

/// Every FDE of Debian's arm64 libc reads, nearly every row is one the kernel evaluates (large
/// frames' records at the frame's bottom included), and the shapes are the ones AArch64 code has:
/// frame records after prologues, the return address in x30 at entries and in leaves, and a
/// thread root (`clone`'s `thread_start`).
#[test]
fn debian_arm64_libc_rows_are_rules_the_kernel_evaluates() {
    for path in [LIBC, LD_SO] {
        let (rows, bad) = rows(path);
        let counts = by_rule(&rows);
        eprintln!("{path}: {} rows: {counts:?}", rows.len());
        assert_eq!(bad, 0, "{path}: FDEs gimli refused");
        let share = |name: &str| counts.get(name).copied().unwrap_or(0) as f64 / rows.len() as f64;
        // What is left: hand-written code whose CFA is another register (`setcontext`'s x0).
        assert!(
            share("unsupported") < 0.005,
            "{path}: {:.2}% of rows unsupported: {counts:?}",
            share("unsupported") * 100.0
        );
        assert_eq!(counts.get("other"), None, "{path}: {counts:?}");
        assert!(share("frame record saved") > 0.3, "{path}: {counts:?}");
        assert!(share("return address in x30") > 0.1, "{path}: {counts:?}");
        // CFA offsets are multiples of 16 on AArch64 (sp stays 16-byte aligned).
        let misaligned = rows
            .iter()
            .filter(|r| matches!(r.cfa_rule(), cfa::RSP | cfa::RBP) && r.cfa_offset % 16 != 0)
            .count();
        assert_eq!(misaligned, 0, "{path}: CFA offsets not multiples of 16");
    }
    let (libc, _) = rows(LIBC);
    assert!(
        by_rule(&libc).contains_key("end"),
        "libc's thread roots give no END row"
    );
}
