//! AArch64's user registers: pc, sp, the frame pointer x29 and the link register x30 (a leaf's return
//! address until its prologue saves it, which the table walk reads; a walk by frame pointers loses
//! that leaf's caller, as perf's does).

use aya_ebpf::{
    bindings::user_pt_regs,
    helpers::{
        bpf_probe_read_kernel,
        generated::{bpf_get_current_task_btf, bpf_task_pt_regs},
    },
};

use super::UserRegs;

/// `PSTATE.M`: the exception level and stack pointer the context ran with; 0 is EL0t, user code.
const PSR_MODE_MASK: u64 = 0xf;

/// Whether the interrupted context was user code.
#[inline(always)]
pub fn is_user_mode(regs: &user_pt_regs) -> bool {
    regs.pstate & PSR_MODE_MASK == 0
}

/// The registers of an interrupted user-mode context.
#[inline(always)]
pub fn from_pt_regs(regs: &user_pt_regs) -> UserRegs {
    UserRegs {
        pc: regs.pc,
        sp: regs.sp,
        bp: regs.regs[29],
        r13: 0,
        lr: regs.regs[30],
    }
}

/// The current task's saved user registers; None for kernel threads (nothing saved in user mode) or
/// when they cannot be read.
#[inline(always)]
pub fn current_task_user_regs() -> Option<UserRegs> {
    /// `user_pt_regs` from x29 on: x29, x30, sp, pc, pstate (the start of the kernel's `pt_regs`).
    #[repr(C)]
    struct Tail {
        x29: u64,
        x30: u64,
        sp: u64,
        pc: u64,
        pstate: u64,
    }
    // SAFETY: both helpers take the current task; the result is only read through
    // bpf_probe_read_kernel, which tolerates a bad pointer. One small read rather than the whole
    // 272-byte structure keeps the BPF stack small.
    let tail = unsafe {
        let task = bpf_get_current_task_btf();
        let regs = bpf_task_pt_regs(task) as *const user_pt_regs;
        bpf_probe_read_kernel((&raw const (*regs).regs[29]).cast::<Tail>())
    };
    let zero = Tail {
        x29: 0,
        x30: 0,
        sp: 0,
        pc: 0,
        pstate: 0,
    };
    let read = tail.is_ok();
    let tail = tail.unwrap_or(zero);
    let regs = UserRegs {
        pc: tail.pc,
        sp: tail.sp,
        bp: tail.x29,
        r13: 0,
        lr: tail.x30,
    };
    (read && tail.pstate & PSR_MODE_MASK == 0).then_some(regs)
}
