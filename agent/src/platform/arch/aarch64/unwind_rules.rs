//! aarch64's unwind rules: DWARF register numbers of the AArch64 ABI and the translation of one
//! evaluated CFI row into the kernel's [`UnwindRow`] (see `sonde_abi::unwind::rbp` for what its
//! frame-pointer rules mean on AArch64). The CFA is sp or x29 plus an offset; the return address is
//! x30, saved with x29 as the frame record (`stp x29, x30`), saved alone, or still in x30 (a leaf).

use gimli::{CfaRule, Register, RegisterRule, UnwindTableRow};
use sonde_abi::UnwindRow;
use sonde_abi::unwind::{cfa, rbp};

/// DWARF register numbers of the AArch64 ABI (DWARF for the Arm 64-bit Architecture, 4.1).
const X29: Register = Register(29);
const X30: Register = Register(30);
const SP: Register = Register(31);

/// Where a register is in the caller's frame, as far as the kernel can tell.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Saved {
    /// Not saved: the register still holds the caller's value.
    No,
    /// At CFA + this many bytes (a multiple of 8).
    At(i64),
    /// Elsewhere (another register, an expression, misaligned): unknown to the kernel.
    Lost,
}

fn saved(rule: Option<RegisterRule<usize>>) -> Saved {
    match rule {
        None | Some(RegisterRule::SameValue) => Saved::No,
        Some(RegisterRule::Offset(offset)) if offset % 8 == 0 => Saved::At(offset),
        Some(_) => Saved::Lost,
    }
}

/// `offset` bytes from the CFA as the row's 8-byte slots, when they fit.
fn slots(offset: i64) -> Option<i8> {
    i8::try_from(offset / 8).ok()
}

/// Translates the CFI row in effect from `pc`. `signal` says the FDE is a signal trampoline (CIE
/// augmentation `S`), whose interrupted registers the kernel reads from the `rt_sigframe` at sp;
/// `section` is the CFI section (no AArch64 expression is evaluated).
pub(crate) fn translate(
    pc: u32,
    row: &UnwindTableRow<usize>,
    signal: bool,
    _section: &[u8],
) -> UnwindRow {
    if signal {
        return only(pc, cfa::SIGNAL);
    }
    // glibc's `_start` and `thread_start` mark the outermost frame with an undefined x30.
    let return_address = match row.register(X30) {
        Some(RegisterRule::Undefined) => return only(pc, cfa::END),
        rule => saved(rule),
    };
    let (cfa_rule, cfa_offset) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let rule = match *register {
                SP => cfa::RSP,
                X29 => cfa::RBP,
                _ => return only(pc, cfa::UNSUPPORTED),
            };
            match u16::try_from(*offset) {
                Ok(offset) => (rule, offset),
                Err(_) => return only(pc, cfa::UNSUPPORTED),
            }
        }
        CfaRule::Expression(_) => return only(pc, cfa::UNSUPPORTED),
    };
    let frame_pointer = match row.register(X29) {
        Some(RegisterRule::Undefined) => Saved::No,
        rule => saved(rule),
    };
    let bottom = -i64::from(cfa_offset);
    let (fp_rule, offset) = match (frame_pointer, return_address) {
        (Saved::No, Saved::No) => (rbp::SAME, Some(0)),
        (Saved::Lost, Saved::No) => (rbp::LOST, Some(0)),
        // The frame record, x30 in the word above x29: where it fits the row's slots, else at the
        // bottom of the frame (`sub sp, sp, #n; stp x29, x30, [sp]; mov x29, sp`: a large frame,
        // its CFA sp + n or x29 + n).
        (Saved::At(fp), Saved::At(ra)) if ra == fp + 8 => match slots(fp) {
            Some(slot) => (rbp::AT_CFA, Some(slot)),
            None if fp == bottom => (rbp::RECORD_AT_BOTTOM, Some(0)),
            None => (rbp::LOST_RA_AT_CFA, None),
        },
        (Saved::No, Saved::At(ra)) => (rbp::RA_AT_CFA, slots(ra)),
        // x29 saved apart from x30: the return address is known, x29 is given up (a later frame
        // whose CFA is x29 ends the walk, counted).
        (Saved::At(_) | Saved::Lost, Saved::At(ra)) => (rbp::LOST_RA_AT_CFA, slots(ra)),
        // x30 saved where the kernel cannot read it, or x29 saved while x30 is still live.
        _ => (rbp::SAME, None),
    };
    let Some(offset) = offset else {
        return only(pc, cfa::UNSUPPORTED);
    };
    UnwindRow {
        pc,
        cfa_offset,
        rbp_offset: offset,
        kind: cfa_rule | fp_rule,
    }
}

/// A row whose CFA rule says everything (END, SIGNAL, UNSUPPORTED): offsets 0, x29 unchanged.
fn only(pc: u32, cfa_rule: u8) -> UnwindRow {
    UnwindRow {
        pc,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: cfa_rule | rbp::SAME,
    }
}
