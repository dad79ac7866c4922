//! Go's frames on aarch64, as its SP-delta table (`.gopclntab`'s pcsp) and its prologues describe
//! them (cmd/internal/obj/arm64's `preprocess`): the return address arrives in the link register and
//! the prologue stores it at the new SP, with the caller's frame pointer just below, so at a delta
//! the CFA (the entry's SP) is sp + delta and the frame record `{x29, x30}` is at CFA - delta - 8.
//! Unwinding by the deltas rather than by x29 matters on arm64 beyond leaves: Go before 1.21 did not
//! adjust the frame pointers saved below SP when it copied a growing stack, so an x29 chain can lead
//! into the freed old stack.

use sonde_abi::{
    UnwindRow,
    unwind::{cfa, rbp},
};

/// Go code is unwound by its SP deltas on aarch64.
pub(crate) const GO_SP_DELTAS: bool = true;

/// `MOVD R29, -8(RSP)` (`stur x29, [sp, #-8]`): the small-frame prologue's save of the frame pointer,
/// right after `MOVD.W R30, -delta(RSP)` moved SP.
const SAVE_FP: [u8; 4] = 0xf81f83fd_u32.to_le_bytes();
/// `STP (R29, R30), -8(R20)` then `MOVD R20, RSP`: the large-frame prologue saves both before SP moves.
const SAVE_PAIR: [u8; 4] = 0xa93ffa9d_u32.to_le_bytes();
const MOVE_SP: [u8; 4] = 0x9100029f_u32.to_le_bytes();

/// The offset in `code` (a function's bytes) from which the caller's x29 is saved below the return
/// address, given that the function's SP first moves at `first` (by `_delta` bytes); None when its
/// prologue is none of Go's (assembly with `NOFRAME`, which leaves x29 alone).
pub(crate) fn go_frame_pointer_saved(code: &[u8], first: usize, _delta: i32) -> Option<usize> {
    if code.get(first..first + 4) == Some(&SAVE_FP[..]) {
        return Some(first + 4);
    }
    let before = code.get(first.checked_sub(8)?..first)?;
    (before[..4] == SAVE_PAIR && before[4..] == MOVE_SP).then_some(first)
}

/// The row of Go code from `pc` on, where sp is `delta` bytes below its value at the function's
/// entry and `fp_saved` says whether the caller's x29 is in the frame. At delta 0 the return
/// address is still in x30 (the kernel takes it there in the walk's first frame only). A delta the
/// row cannot hold (unknown, negative, unaligned, or a frame record past 1 KiB below the CFA) is
/// left to frame pointers.
pub(crate) fn go_row(pc: u32, delta: i32, fp_saved: bool) -> UnwindRow {
    let no_info = UnwindRow {
        pc,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: cfa::NO_INFO | rbp::SAME,
    };
    let Ok(offset) = u16::try_from(delta) else {
        return no_info;
    };
    if delta % 8 != 0 {
        return no_info;
    }
    let return_address = -(delta / 8);
    let (rule, slot) = match (delta, fp_saved) {
        (0, _) => (rbp::SAME, 0),
        (_, true) => (rbp::AT_CFA, return_address - 1),
        (_, false) => (rbp::RA_AT_CFA, return_address),
    };
    let Ok(slot) = i8::try_from(slot) else {
        return no_info;
    };
    UnwindRow {
        pc,
        cfa_offset: offset,
        rbp_offset: slot,
        kind: cfa::RSP | rule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prologues of `go tool objdump` of Go 1.19 for arm64 (`main.spin`, `main.main`).
    #[test]
    fn both_prologue_styles_say_where_x29_is_saved() {
        let word = |w: u32| w.to_le_bytes();
        // MOVD 16(R28), R16; CMP R16, RSP; BLS; MOVD.W R30, -32(RSP); MOVD R29, -8(RSP);
        // SUB $8, RSP, R29
        let small: Vec<u8> = [
            0xf9400b90, 0xeb3063ff, 0x54000349, 0xf81e0ffe, 0xf81f83fd, 0xd10023fd,
        ]
        .into_iter()
        .flat_map(word)
        .collect();
        assert_eq!(go_frame_pointer_saved(&small, 16, 32), Some(20));
        // ...; SUB $352, RSP, R20; STP (R29, R30), -8(R20); MOVD R20, RSP; SUB $8, RSP, R29
        let large: Vec<u8> = [0xd10583f4, 0xa93ffa9d, 0x9100029f, 0xd10023fd]
            .into_iter()
            .flat_map(word)
            .collect();
        assert_eq!(go_frame_pointer_saved(&large, 12, 352), Some(12));
        // A NOFRAME function's first instructions are no prologue.
        assert_eq!(go_frame_pointer_saved(&large[..8], 8, 16), None);
    }

    #[test]
    fn rows_find_the_frame_record_below_the_delta() {
        let row = go_row(0x40, 32, true);
        assert_eq!((row.cfa_offset, row.rbp_offset), (32, -5));
        assert_eq!(row.kind, cfa::RSP | rbp::AT_CFA);
        let row = go_row(0x40, 32, false);
        assert_eq!((row.rbp_offset, row.kind), (-4, cfa::RSP | rbp::RA_AT_CFA));
        assert_eq!(go_row(0x40, 0, false).kind, cfa::RSP | rbp::SAME);
        assert_eq!(go_row(0x40, -8, true).kind, cfa::NO_INFO | rbp::SAME);
        assert_eq!(go_row(0x40, 12, true).kind, cfa::NO_INFO | rbp::SAME);
        assert_eq!(go_row(0x40, 2048, true).kind, cfa::NO_INFO | rbp::SAME);
    }
}
