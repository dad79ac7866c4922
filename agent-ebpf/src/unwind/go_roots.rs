//! Go thread roots: a frame-pointer walk of a Go thread ends with a zero frame pointer, which also
//! ends chains cut short by code that uses rbp for data. The walk reached the thread's root only
//! when its last frame lies in one of the process's root functions (`sonde_abi::go::ROOT_FUNCTIONS`,
//! whose ranges userspace read from the binary's `.gopclntab`).

use sonde_abi::{
    go::ROOT_FUNCTIONS,
    unwind::{FRAME_EXACT, outcome},
};

use super::{Scratch, step::FRAME_INDEX_MASK};
use crate::{globals, maps::GO_PROCS};

/// Turns a walk of a Go process that ended at a zero frame pointer (`FP_END`) into one that reached
/// its root when its outermost frame is in a Go root function.
#[inline(always)]
pub fn mark_root(s: &mut Scratch, tgid: u32) {
    if s.stack.outcome != outcome::FP_END || s.stack.len == 0 || globals::go_labels() == 0 {
        return;
    }
    let Some(p) = GO_PROCS.get_ptr(tgid) else {
        return;
    };
    // SAFETY: a pointer from a successful lookup, valid for this program run.
    let p = unsafe { &*p };
    let last = (s.stack.len.wrapping_sub(1) & FRAME_INDEX_MASK) as usize;
    let Some(&word) = s.stack.frames.get(last) else {
        return;
    };
    // A return address is one past its call, which may be a function's last instruction
    // (`runtime.goexit` is a nop and the call): the call itself is what lies in the function.
    let pc = word & !FRAME_EXACT;
    let at = if word & FRAME_EXACT != 0 {
        pc
    } else {
        pc.wrapping_sub(1)
    };
    let at = at.wrapping_sub(p.bias);
    for i in 0..ROOT_FUNCTIONS {
        let r = p.roots[i];
        if r.start <= at && at < r.end {
            s.stack.outcome = outcome::ROOT;
            return;
        }
    }
}
