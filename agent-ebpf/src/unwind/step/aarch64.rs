//! AArch64's frame rules: the CFA from sp or x29, the caller's x29 and the return address (x30)
//! saved as the frame record `{x29, x30}` at CFA + offset or x30 alone, and in the walk's first frame
//! the return address still in x30 (a leaf before its prologue or after its epilogue, or one that
//! never saves it). Frame records are `[saved x29, return address]` at x29, as x86_64's. Return
//! addresses signed with pointer authentication (`paciasp`, Debian trixie's and Ubuntu's default
//! `-mbranch-protection`) are stripped to their address. A signal trampoline's frame (a `SIGNAL`
//! row: Go's `sigreturn` stubs; the vDSO's `__kernel_rt_sigreturn` has no CFI on Debian's kernels)
//! continues from the registers the kernel saved in its `rt_sigframe`.

use aya_ebpf::helpers::bpf_probe_read_user;
use sonde_abi::{
    UnwindRule, stat,
    unwind::{cfa, outcome, rbp},
};

use super::{Flow, mark_trampoline_exact, no_info, stop};
use crate::unwind::Scratch;

/// AArch64 `struct rt_sigframe` as the trampoline sees it: sp points at it; `siginfo` (128 bytes),
/// then the `ucontext`, whose `uc_mcontext` is 176 bytes in (libunwind's `LINUX_UC_MCONTEXT_OFF`);
/// in the `sigcontext`, after `fault_address`, x29 is at +240, then x30, sp and pc. One read covers
/// x29 .. pc.
const SIGFRAME_X29: u64 = 128 + 176 + 240;
#[repr(C)]
struct SigRegs {
    x29: u64,
    x30: u64,
    sp: u64,
    pc: u64,
}

/// AArch64 user addresses are below this: 48-bit virtual addresses, as Debian's, Ubuntu's and Amazon
/// Linux's arm64 kernels give user space (52 bits only to a process that asks `mmap` for them).
pub const USER_LIMIT: u64 = 1 << 48;

/// What is left of a return address once its pointer authentication code (bits 48 to 54, and the
/// top byte) is stripped, as the kernel's `ptrauth_strip_user_insn_pac` does for perf's callchains.
#[inline(always)]
pub(super) fn code_address(address: u64) -> u64 {
    address & (USER_LIMIT - 1)
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
        cfa::END => return stop(s, outcome::ROOT),
        cfa::SIGNAL => return signal_frame(s),
        cfa::NO_INFO => return no_info(s, stat::FALLBACK_NO_INFO),
        _ => return stop(s, outcome::UNSUPPORTED),
    };
    let slot = match row.rbp_rule() {
        rbp::RECORD_AT_BOTTOM => cfa.wrapping_sub(offset),
        _ => cfa.wrapping_add((i64::from(row.rbp_offset) * 8) as u64),
    };
    let rule = row.rbp_rule();
    let in_link_register = rule == rbp::SAME || rule == rbp::LOST;
    let return_address = match rule {
        // `stp x29, x30, [sp, #-n]!`: one read for both.
        rbp::AT_CFA | rbp::RECORD_AT_BOTTOM => {
            let Some([bp, ra]) = s.window.pair(slot) else {
                return stop(s, outcome::READ_FAULT);
            };
            s.regs.bp = bp;
            s.bp_lost = 0;
            ra
        }
        rbp::RA_AT_CFA | rbp::LOST_RA_AT_CFA => {
            let Some(ra) = s.window.word(slot) else {
                return stop(s, outcome::READ_FAULT);
            };
            if rule == rbp::LOST_RA_AT_CFA {
                s.bp_lost = 1;
            }
            ra
        }
        // x30 holds the return address only where the registers are the interrupted context's (the
        // walk's first frame, or the frame a signal interrupted): any callee's `bl` overwrote it.
        rbp::SAME | rbp::LOST if s.exact != 0 => {
            if rule == rbp::LOST {
                s.bp_lost = 1;
            }
            s.regs.lr
        }
        _ => return stop(s, outcome::UNSUPPORTED),
    };
    let return_address = code_address(return_address);
    if return_address == 0 {
        return stop(s, outcome::ROOT);
    }
    // Callers live at higher addresses: a CFA below sp means a wrong rule or a corrupt stack. Only a
    // leaf whose return address is still in x30 may have no stack of its own (CFA = sp); anywhere
    // else a CFA that does not move up would loop.
    if cfa < s.regs.sp || (cfa == s.regs.sp && !in_link_register) {
        return stop(s, outcome::BAD_FRAME);
    }
    s.regs.sp = cfa;
    s.regs.pc = return_address;
    s.exact = 0;
    Flow::Continue
}

/// The frame of a signal trampoline: continue from the interrupted registers the kernel saved.
#[inline(always)]
fn signal_frame(s: &mut Scratch) -> Flow {
    mark_trampoline_exact(s);
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let Ok(saved) = (unsafe { bpf_probe_read_user((s.regs.sp + SIGFRAME_X29) as *const SigRegs) })
    else {
        return stop(s, outcome::READ_FAULT);
    };
    let pc = code_address(saved.pc);
    if pc == 0 {
        return stop(s, outcome::BAD_FRAME);
    }
    s.regs.pc = pc;
    s.regs.sp = saved.sp;
    s.regs.bp = saved.x29;
    s.regs.lr = saved.x30;
    s.bp_lost = 0;
    // The interrupted instruction itself, whose return address may still be in x30.
    s.exact = 1;
    Flow::Continue
}
