//! Go's frames on x86_64, as its SP-delta table (`.gopclntab`'s pcsp) and its prologues describe
//! them (cmd/internal/obj/x86's `preprocess`, runtime/traceback.go): the return address is at the
//! entry's SP, so CFA = rsp + delta + 8; a function with a frame saves the caller's rbp just below
//! the return address, at CFA - 16.

use sonde_abi::{
    UnwindRow,
    unwind::{cfa, rbp},
};

/// Go code is unwound by its SP deltas on x86_64.
pub(crate) const GO_SP_DELTAS: bool = true;

/// Where the caller's rbp is at CFA + `RBP_AT` * 8 once the prologue saved it.
const RBP_AT: i8 = -2;

/// The offset in `code` (a function's bytes) from which the caller's rbp is saved at CFA - 16,
/// given that the function's SP first moves at `first` by `delta` bytes; None when its prologue
/// is none of Go's (assembly with `NOFRAME`, which leaves rbp alone).
/// - Go 1.21 and later: `PUSHQ BP` (0x55) ends at `first`, and rbp is saved from there.
/// - Go 1.20 and earlier: `SUBQ $delta, SP` ends at `first`, then `MOVQ BP, delta-8(SP)` (disp8 or
///   disp32) saves it: from the instruction after that one.
pub(crate) fn go_frame_pointer_saved(code: &[u8], first: usize, delta: i32) -> Option<usize> {
    if first.checked_sub(1).and_then(|at| code.get(at)) == Some(&0x55) && delta == 8 {
        return Some(first);
    }
    let at = code.get(first..)?;
    let disp = i64::from(delta) - 8;
    match at {
        [0x48, 0x89, 0x6c, 0x24, d, ..] if i64::from(*d as i8) == disp => Some(first + 5),
        [0x48, 0x89, 0xac, 0x24, a, b, c, d, ..]
            if i64::from(i32::from_le_bytes([*a, *b, *c, *d])) == disp =>
        {
            Some(first + 8)
        }
        _ => None,
    }
}

/// The row of Go code from `pc` on, where rsp is `delta` bytes below its value at the function's
/// entry and `rbp_saved` says whether the caller's rbp is in the frame. A delta the table cannot
/// hold (unknown, negative or past 64 KiB) is left to frame pointers.
pub(crate) fn go_row(pc: u32, delta: i32, rbp_saved: bool) -> UnwindRow {
    let Some(offset) = u16::try_from(i64::from(delta) + 8)
        .ok()
        .filter(|_| delta >= 0)
    else {
        return UnwindRow {
            pc,
            cfa_offset: 0,
            rbp_offset: 0,
            kind: cfa::NO_INFO | rbp::SAME,
        };
    };
    let (rule, at) = if rbp_saved && delta > 0 {
        (rbp::AT_CFA, RBP_AT)
    } else {
        (rbp::SAME, 0)
    };
    UnwindRow {
        pc,
        cfa_offset: offset,
        rbp_offset: at,
        kind: cfa::RSP | rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prologues of `go tool objdump` on Go 1.19 (`main.burnA`) and Go 1.23.
    #[test]
    fn both_prologue_styles_say_where_rbp_is_saved() {
        // CMPQ 0x10(R14), SP; JBE; SUBQ $0x10, SP; MOVQ BP, 0x8(SP); LEAQ 0x8(SP), BP
        let old = [
            0x49, 0x3b, 0x66, 0x10, 0x76, 0x24, 0x48, 0x83, 0xec, 0x10, 0x48, 0x89, 0x6c, 0x24,
            0x08, 0x48, 0x8d, 0x6c, 0x24, 0x08,
        ];
        assert_eq!(go_frame_pointer_saved(&old, 10, 0x10), Some(15));
        // A different displacement is not the save of rbp below the return address.
        assert_eq!(go_frame_pointer_saved(&old, 10, 0x20), None);
        // CMPQ 0x10(R14), SP; JBE; PUSHQ BP; MOVQ SP, BP; SUBQ $0x10, SP
        let new = [
            0x49, 0x3b, 0x66, 0x10, 0x76, 0x24, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10,
        ];
        assert_eq!(go_frame_pointer_saved(&new, 7, 8), Some(7));
        // A frameless leaf's bytes are no prologue.
        assert_eq!(
            go_frame_pointer_saved(&[0x31, 0xc9, 0xeb, 0x1c], 0, 8),
            None
        );
    }

    #[test]
    fn rows_take_the_return_address_above_the_delta() {
        let row = go_row(0x40, 0x18, true);
        assert_eq!((row.cfa_offset, row.rbp_offset), (0x20, -2));
        assert_eq!(row.kind, cfa::RSP | rbp::AT_CFA);
        assert_eq!(go_row(0x40, 0, true).kind, cfa::RSP | rbp::SAME);
        assert_eq!(go_row(0x40, -1, false).kind, cfa::NO_INFO | rbp::SAME);
        assert_eq!(go_row(0x40, 1 << 20, false).kind, cfa::NO_INFO | rbp::SAME);
    }
}
