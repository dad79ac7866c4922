//! Go's frames on aarch64: not unwound by SP deltas yet (the return address is in the link
//! register until the prologue saves it, which the kernel's AArch64 walk has no rows for): frame
//! pointers only.

use sonde_abi::UnwindRow;

/// Go code is walked by frame pointers on aarch64.
pub(crate) const GO_SP_DELTAS: bool = false;

/// Never called while [`GO_SP_DELTAS`] is false.
pub(crate) fn go_frame_pointer_saved(_code: &[u8], _first: usize, _delta: i32) -> Option<usize> {
    None
}

/// Never called while [`GO_SP_DELTAS`] is false.
pub(crate) fn go_row(pc: u32, _delta: i32, _rbp_saved: bool) -> UnwindRow {
    UnwindRow {
        pc,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: sonde_abi::unwind::cfa::NO_INFO,
    }
}
