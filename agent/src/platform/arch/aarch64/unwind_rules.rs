//! aarch64's unwind rules: none yet. The kernel programs walk AArch64 stacks by frame pointers
//! ([`super::TABLE_UNWINDING`] is false, so no table is built); every row reads as "no information"
//! until the AArch64 rules (CFA from sp or x29, the return address in x30 or at CFA + offset,
//! pointer authentication bits stripped) are written here.

use gimli::UnwindTableRow;
use sonde_abi::{
    UnwindRow,
    unwind::{cfa, rbp},
};

/// Translates the CFI row in effect from `pc`: no AArch64 rule is known to the kernel yet.
pub(crate) fn translate(
    pc: u32,
    _row: &UnwindTableRow<usize>,
    _signal: bool,
    _section: &[u8],
) -> UnwindRow {
    UnwindRow {
        pc,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: cfa::NO_INFO | rbp::SAME,
    }
}
