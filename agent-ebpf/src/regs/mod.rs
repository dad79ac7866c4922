//! The user registers a walk starts from, either from the perf event's interrupted registers (the
//! sample hit user code) or from the registers the task saved on entering the kernel
//! (`task_pt_regs`: the sample hit the kernel, or the task is being switched out). One module per
//! architecture, chosen by the eBPF build's `bpf_target_arch` (set from the agent's target).

#[cfg(bpf_target_arch = "aarch64")]
mod aarch64;
#[cfg(bpf_target_arch = "x86_64")]
mod x86_64;

#[cfg(bpf_target_arch = "aarch64")]
pub use aarch64::*;
#[cfg(bpf_target_arch = "x86_64")]
pub use x86_64::*;

/// Where a walk starts. The frame pointer is rbp on x86_64, x29 on AArch64; beyond those, each
/// architecture has the registers its leaf frame's rules may name.
#[derive(Clone, Copy)]
pub struct UserRegs {
    /// Instruction pointer (exact: the leaf frame).
    pub pc: u64,
    /// Stack pointer.
    pub sp: u64,
    /// The frame pointer when the code keeps one.
    pub bp: u64,
    /// r13: HotSpot's template interpreter keeps the bytecode pointer of the running method there
    /// (x86_64), so a sample in the interpreter knows its bytecode without the frame's stale copy.
    pub r13: u64,
    /// rbx: glibc's lazy-binding trampoline keeps its CFA there (`sonde_abi::unwind::cfa::RBX`).
    /// The sample's own, so valid for the leaf frame only (x86_64).
    #[cfg(bpf_target_arch = "x86_64")]
    pub rbx: u64,
    /// rdi: glibc's `vfork` keeps its return address there (`cfa::RA_IN_RDI`); leaf frame only
    /// (x86_64).
    #[cfg(bpf_target_arch = "x86_64")]
    pub rdi: u64,
    /// x30, the link register: the return address of a leaf that has not saved it (AArch64).
    #[cfg(bpf_target_arch = "aarch64")]
    pub lr: u64,
}

/// The current thread's thread pointer (x86_64: the fs base, `thread.fsbase`; AArch64: `tpidr_el0`,
/// `thread.uw.tp_value`), from where the kernel saved it in the task (the offset from the kernel's
/// BTF): Err when the offset is unknown or the read fails; 0 when the thread never set one.
#[inline(always)]
pub fn thread_pointer() -> Result<u64, ()> {
    let tp_offset = crate::globals::task_tp_offset();
    if tp_offset == 0 {
        return Err(());
    }
    // SAFETY: the current task is valid for the program's run; a failed read is handled.
    unsafe {
        aya_ebpf::helpers::bpf_probe_read_kernel(
            (aya_ebpf::helpers::bpf_get_current_task() + u64::from(tp_offset)) as *const u64,
        )
    }
    .map_err(|_| ())
}
