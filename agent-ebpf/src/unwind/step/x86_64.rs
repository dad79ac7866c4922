//! x86_64's frame rules: the return address at CFA - 8, the CFA from rsp or rbp, a saved rbp at
//! CFA + offset, and the kernel's `rt_sigframe` layout for signal trampolines; in the leaf frame
//! only, glibc's two register rules (a CFA from rbx, a return address in rdi).

use aya_ebpf::helpers::bpf_probe_read_user;
use sonde_abi::{
    UnwindRule, stat,
    unwind::{cfa, outcome, rbp},
};

use super::{Flow, mark_trampoline_exact, no_info, stop};
use crate::unwind::Scratch;

/// x86_64 user addresses are below this (57-bit with 5-level paging); anything above is kernel or
/// non-canonical, never a caller in user space.
pub const USER_LIMIT: u64 = 1 << 56;

/// x86_64 `struct rt_sigframe` as the signal trampoline sees it: rsp points at the `ucontext` (the
/// handler's return popped `pretcode`); `uc_mcontext` starts 40 bytes in, and in it rbp is at +80,
/// rsp at +120 and rip at +128. One read covers rbp .. rip.
const SIGFRAME_RBP: u64 = 40 + 80;
#[repr(C)]
struct SigRegs {
    rbp: u64,
    _rbx: u64,
    _rdx: u64,
    _rax: u64,
    _rcx: u64,
    rsp: u64,
    rip: u64,
}

/// Applies one table rule.
#[inline(always)]
pub(super) fn apply(s: &mut Scratch, row: UnwindRule) -> Flow {
    let offset = u64::from(row.cfa_offset);
    let cfa = match row.cfa_rule() {
        cfa::RSP => s.regs.sp.wrapping_add(offset),
        cfa::RBP => {
            if s.bp_lost != 0 {
                return stop(s, outcome::UNSUPPORTED);
            }
            s.regs.bp.wrapping_add(offset)
        }
        // binutils' PLT stubs: 8 more bytes on the stack once the stub's push has run.
        cfa::PLT => s.regs.sp + 8 + if s.regs.pc & 15 >= offset { 8 } else { 0 },
        cfa::END => return stop(s, outcome::ROOT),
        cfa::SIGNAL => return signal_frame(s),
        cfa::NO_INFO => return no_info(s, stat::FALLBACK_NO_INFO),
        // Registers other than rsp and rbp are known where the walk starts only (the sample's);
        // callers would need every callee's saves of them tracked.
        cfa::RBX if leaf(s) => s.regs.rbx.wrapping_add(offset),
        cfa::RA_IN_RDI if leaf(s) => return ra_in_rdi(s, offset),
        _ => return stop(s, outcome::UNSUPPORTED),
    };
    let return_address = match row.rbp_rule() {
        // The usual `push rbp` layout: rbp right below the return address, one read for both.
        rbp::AT_CFA if row.rbp_offset == -2 => {
            let Some([bp, ra]) = s.window.pair(cfa.wrapping_sub(16)) else {
                return stop(s, outcome::READ_FAULT);
            };
            s.regs.bp = bp;
            s.bp_lost = 0;
            ra
        }
        rule => {
            let Some(ra) = s.window.word(cfa.wrapping_sub(8)) else {
                return stop(s, outcome::READ_FAULT);
            };
            if rule == rbp::AT_CFA {
                let at = cfa.wrapping_add((i64::from(row.rbp_offset) * 8) as u64);
                let Some(bp) = s.window.word(at) else {
                    return stop(s, outcome::READ_FAULT);
                };
                s.regs.bp = bp;
                s.bp_lost = 0;
            } else if rule == rbp::LOST {
                s.bp_lost = 1;
            }
            ra
        }
    };
    if return_address == 0 {
        return stop(s, outcome::ROOT);
    }
    // Callers live at higher addresses: a CFA that does not move up means a wrong rule or a corrupt
    // stack, and would loop.
    if cfa <= s.regs.sp || return_address >= USER_LIMIT {
        return stop(s, outcome::BAD_FRAME);
    }
    s.regs.sp = cfa;
    s.regs.pc = return_address;
    s.exact = 0;
    Flow::Continue
}

/// Whether the frame being unwound is the first of the walk, whose registers are the sample's (the
/// native callbacks push a frame before stepping it).
#[inline(always)]
fn leaf(s: &Scratch) -> bool {
    s.stack.len == 1
}

/// A leaf frame whose return address is in rdi (glibc's `vfork`, which popped it): the caller's
/// stack pointer is the CFA, which may equal rsp here (nothing of the frame left on the stack).
#[inline(always)]
fn ra_in_rdi(s: &mut Scratch, offset: u64) -> Flow {
    let return_address = s.regs.rdi;
    if return_address == 0 || return_address >= USER_LIMIT {
        return stop(s, outcome::BAD_FRAME);
    }
    s.regs.sp = s.regs.sp.wrapping_add(offset);
    s.regs.pc = return_address;
    s.exact = 0;
    Flow::Continue
}

/// The frame of a signal trampoline: continue from the interrupted registers saved by the kernel.
#[inline(always)]
fn signal_frame(s: &mut Scratch) -> Flow {
    mark_trampoline_exact(s);
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let Ok(saved) = (unsafe { bpf_probe_read_user((s.regs.sp + SIGFRAME_RBP) as *const SigRegs) })
    else {
        return stop(s, outcome::READ_FAULT);
    };
    if saved.rip == 0 || saved.rip >= USER_LIMIT {
        return stop(s, outcome::BAD_FRAME);
    }
    s.regs.pc = saved.rip;
    s.regs.sp = saved.rsp;
    s.regs.bp = saved.rbp;
    s.bp_lost = 0;
    // The interrupted instruction itself, not a return address.
    s.exact = 1;
    Flow::Continue
}

/// A return address as read from the stack: user addresses are what they are on x86_64.
#[inline(always)]
pub(super) fn code_address(address: u64) -> u64 {
    address
}
