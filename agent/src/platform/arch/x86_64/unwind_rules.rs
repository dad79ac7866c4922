//! x86_64's unwind rules: DWARF register numbers, binutils' PLT CFA expressions and the translation
//! of one evaluated CFI row into the kernel's [`UnwindRow`]. Everything architecture-specific of the
//! table builder (`crate::unwind::table`) lives here; each architecture has this file with the same
//! `translate`.

use gimli::constants::{
    DW_OP_and, DW_OP_breg7, DW_OP_breg16, DW_OP_ge, DW_OP_lit3, DW_OP_lit9, DW_OP_lit10,
    DW_OP_lit11, DW_OP_lit15, DW_OP_plus, DW_OP_shl, DwOp,
};
use gimli::{CfaRule, Register, RegisterRule, UnwindTableRow};
use sonde_abi::UnwindRow;
use sonde_abi::unwind::{cfa, rbp};

/// DWARF register numbers of the x86_64 psABI (figure 3.36).
const RBX: Register = Register(3);
const RDI: Register = Register(5);
const RBP: Register = Register(6);
const RSP: Register = Register(7);
/// The return-address column (the psABI names it RA; it holds rip).
const RA: Register = Register(16);

/// Where `call` leaves the return address: just below the CFA. Every other rule but glibc's `vfork`
/// (in rdi) is unusual enough (hand-written assembly) for the kernel not to know it.
const RA_OFFSET: i64 = -8;

/// binutils' CFA expression for lazy-binding PLT stubs: `rsp + 8 + ((rip & 15) >= threshold) << 3`,
/// i.e. rsp + 8 until the stub's `push`, rsp + 16 after it. The threshold is where the push ends: 11
/// for the classic `.plt`, 10 for the MPX layout (`.plt.bnd`), 9 for IBT stubs (`endbr64` first, as
/// built with `-fcf-protection`).
const fn plt_expression(threshold: DwOp) -> [u8; 11] {
    [
        DW_OP_breg7.0,
        8,
        DW_OP_breg16.0,
        0,
        DW_OP_lit15.0,
        DW_OP_and.0,
        threshold.0,
        DW_OP_ge.0,
        DW_OP_lit3.0,
        DW_OP_shl.0,
        DW_OP_plus.0,
    ]
}
/// The PLT expressions binutils writes, with their thresholds.
const PLT_EXPRESSIONS: [([u8; 11], u16); 3] = [
    (plt_expression(DW_OP_lit11), 11),
    (plt_expression(DW_OP_lit10), 10),
    (plt_expression(DW_OP_lit9), 9),
];

/// Translates the CFI row in effect from `pc`. `signal` says the FDE is a signal trampoline (CIE
/// augmentation `S`); `section` is the CFI section, which expressions point into.
pub(crate) fn translate(
    pc: u32,
    row: &UnwindTableRow<usize>,
    signal: bool,
    section: &[u8],
) -> UnwindRow {
    // The kernel reads every register of the interrupted frame from the ucontext at rsp: neither
    // the CFA nor rbp rules of the trampoline matter.
    if signal {
        return only(pc, cfa::SIGNAL);
    }
    let ra_in_rdi = match row.register(RA) {
        // glibc's `_start` and `clone3` say "no caller" this way.
        Some(RegisterRule::Undefined) => return only(pc, cfa::END),
        Some(RegisterRule::Offset(RA_OFFSET)) => false,
        // glibc's `vfork`: popped into rdi across the system call.
        Some(RegisterRule::Register(RDI)) => true,
        _ => return only(pc, cfa::UNSUPPORTED),
    };
    let (cfa_rule, cfa_offset) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let rule = match (*register, ra_in_rdi) {
                (RSP, false) => cfa::RSP,
                (RSP, true) => cfa::RA_IN_RDI,
                (RBP, false) => cfa::RBP,
                // glibc's `_dl_runtime_resolve_*` (the kernel evaluates it in a leaf frame only).
                (RBX, false) => cfa::RBX,
                _ => return only(pc, cfa::UNSUPPORTED),
            };
            match u16::try_from(*offset) {
                Ok(offset) => (rule, offset),
                // Frames above 64 KiB, or a negative offset: the row cannot say it.
                Err(_) => return only(pc, cfa::UNSUPPORTED),
            }
        }
        CfaRule::Expression(expression) => {
            let bytes = section.get(expression.offset..expression.offset + expression.length);
            match PLT_EXPRESSIONS
                .iter()
                .find(|(pattern, _)| Some(pattern.as_slice()) == bytes)
            {
                Some((_, threshold)) if !ra_in_rdi => (cfa::PLT, *threshold),
                _ => return only(pc, cfa::UNSUPPORTED),
            }
        }
    };
    let (rbp_rule, rbp_offset) = match row.register(RBP) {
        None | Some(RegisterRule::Undefined | RegisterRule::SameValue) => (rbp::SAME, 0),
        Some(RegisterRule::Offset(offset)) if offset % 8 == 0 => match i8::try_from(offset / 8) {
            Ok(slots) => (rbp::AT_CFA, slots),
            Err(_) => (rbp::LOST, 0),
        },
        // Saved in another register, by an expression, or misaligned: the kernel cannot recover it,
        // and later frames that use rbp as their CFA will stop.
        Some(_) => (rbp::LOST, 0),
    };
    UnwindRow {
        pc,
        cfa_offset,
        rbp_offset,
        kind: cfa_rule | rbp_rule,
    }
}

/// A row whose CFA rule says everything (END, SIGNAL, UNSUPPORTED): offsets 0, rbp unchanged.
fn only(pc: u32, cfa_rule: u8) -> UnwindRow {
    UnwindRow {
        pc,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: cfa_rule | rbp::SAME,
    }
}
