//! x86_64's user registers: the instruction pointer, stack pointer, rbp and the few others a leaf
//! frame's unwind rule may name (rbx, rdi, r13).

use aya_ebpf::{bindings::pt_regs, helpers::bpf_probe_read_kernel};

use super::UserRegs;

/// Whether the interrupted context was user code: the low two bits of its saved code segment
/// selector are the privilege level, 3 for user mode.
#[inline(always)]
pub fn is_user_mode(regs: &pt_regs) -> bool {
    regs.cs & 3 == 3
}

/// The registers of an interrupted user-mode context.
#[inline(always)]
pub fn from_pt_regs(regs: &pt_regs) -> UserRegs {
    UserRegs {
        pc: regs.rip,
        sp: regs.rsp,
        bp: regs.rbp,
        r13: regs.r13,
        rbx: regs.rbx,
        rdi: regs.rdi,
    }
}

/// The current task's saved user registers; None for kernel threads (nothing saved in user mode) or
/// when they cannot be read.
#[inline(always)]
pub fn current_task_user_regs() -> Option<UserRegs> {
    /// `pt_regs` from `rdi` to `rsp`: rdi, orig_rax, rip, cs, eflags, rsp (x86_64 layout).
    #[repr(C)]
    struct Tail {
        rdi: u64,
        _orig_rax: u64,
        rip: u64,
        cs: u64,
        _eflags: u64,
        rsp: u64,
    }
    /// `pt_regs` from `r13` to `rbx` (x86_64 layout).
    #[repr(C)]
    struct Middle {
        r13: u64,
        _r12: u64,
        rbp: u64,
        rbx: u64,
    }
    // SAFETY: both helpers take the current task; the result is only read through
    // bpf_probe_read_kernel, which tolerates a bad pointer. Two small reads rather than the whole
    // 168-byte structure keep the BPF stack small.
    let (tail, middle) = unsafe {
        let regs = task_pt_regs();
        (
            bpf_probe_read_kernel((&raw const (*regs).rdi).cast::<Tail>()),
            bpf_probe_read_kernel((&raw const (*regs).r13).cast::<Middle>()),
        )
    };
    // Every register defined on every path, a failed read's as zero: with `?` on each read, the
    // compiler carried the undefined payload of the `None` in a register and spilled it, which the
    // verifier refuses ("!read_ok").
    let zero_tail = Tail {
        rdi: 0,
        _orig_rax: 0,
        rip: 0,
        cs: 0,
        _eflags: 0,
        rsp: 0,
    };
    let zero_middle = Middle {
        r13: 0,
        _r12: 0,
        rbp: 0,
        rbx: 0,
    };
    let read = tail.is_ok() && middle.is_ok();
    let (tail, middle) = (tail.unwrap_or(zero_tail), middle.unwrap_or(zero_middle));
    let regs = UserRegs {
        pc: tail.rip,
        sp: tail.rsp,
        bp: middle.rbp,
        r13: middle.r13,
        rbx: middle.rbx,
        rdi: tail.rdi,
    };
    (read && tail.cs & 3 == 3).then_some(regs)
}

/// Where the current task's user registers are saved.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn task_pt_regs() -> *const pt_regs {
    use aya_ebpf::helpers::generated::{bpf_get_current_task_btf, bpf_task_pt_regs};
    // SAFETY: helpers of the current task; the pointer is only read through bpf_probe_read_kernel.
    unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) as *const pt_regs }
}

/// The size of a task's kernel stack on x86_64 (`THREAD_SIZE`: 4 pages; KASan kernels double it,
/// and distributions do not ship those).
#[cfg(feature = "legacy")]
const THREAD_SIZE: u64 = 16 * 1024;

/// Where the current task's user registers are saved, in the legacy object (Linux 5.10 to 6.0,
/// without `bpf_task_pt_regs` nor `bpf_get_current_task_btf`): at the top of its kernel stack, as
/// x86_64's `task_pt_regs()` finds them (`task->stack + THREAD_SIZE`, less one `pt_regs`), with the
/// `stack` member's offset from the kernel's BTF. A bad address when unknown: the reads then fail.
#[cfg(feature = "legacy")]
#[inline(always)]
fn task_pt_regs() -> *const pt_regs {
    use aya_ebpf::helpers::bpf_get_current_task;
    let offset = crate::globals::task_stack_offset();
    if offset == 0 {
        return core::ptr::null();
    }
    // SAFETY: a kernel read that tolerates a bad address.
    let stack: u64 = unsafe {
        bpf_probe_read_kernel((bpf_get_current_task() + u64::from(offset)) as *const u64)
    }
    .unwrap_or(0);
    if stack == 0 {
        return core::ptr::null();
    }
    (stack + THREAD_SIZE - core::mem::size_of::<pt_regs>() as u64) as *const pt_regs
}
