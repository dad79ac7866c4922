//! The kernel/user ABI of sonde: every type and constant shared between the eBPF programs and the agent.
//!
//! Rules (both sides compile this one file): `#[repr(C)]`, `Copy`, no `bool`, explicit padding, and a
//! compile-time size assertion per type so a layout change on one side cannot go unnoticed.
#![no_std]

/// Length of a task's `comm` as the kernel stores it.
pub const TASK_COMM_LEN: usize = 16;
/// Frames per stack kept by the kernel's stack-trace maps (`perf_event_max_stack` default).
pub const MAX_STACK_DEPTH: usize = 127;
/// Number of map sets the kernel writes in turn; see [`Control::generation`].
pub const SLOTS: u64 = 3;

/// `stack_id` value meaning "no stack of this kind was taken" (e.g. the user stack of a kernel thread).
pub const STACK_NONE: i32 = -14; // -EFAULT, what bpf_get_stackid returns when there is nothing to walk
/// `stack_id` value meaning the stack-trace map bucket was taken by another stack (hash collision).
pub const STACK_COLLISION: i32 = -17; // -EEXIST
/// `stack_id` value meaning the stack ids of an off-CPU episode were from a map set already recycled.
pub const STACK_STALE: i32 = -116; // -ESTALE

/// Key of the in-kernel aggregation: one process, one thread name, one pair of stacks.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SampleKey {
    /// Process id (the kernel's tgid).
    pub tgid: u32,
    /// Id in the stack-trace map of slot `stack_slot`, or a negative errno (see `STACK_*`).
    pub user_stack_id: i32,
    /// Id in the stack-trace map of slot `stack_slot`, or a negative errno.
    pub kernel_stack_id: i32,
    /// Which slot's stack-trace map the ids refer to (off-CPU episodes can span a slot change).
    pub stack_slot: u32,
    /// Thread name at sampling time, NUL padded.
    pub comm: [u8; TASK_COMM_LEN],
}
const _: () = assert!(core::mem::size_of::<SampleKey>() == 32);

/// Value of the off-CPU aggregation.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct OffCpuValue {
    /// Sum of blocked time, nanoseconds.
    pub total_ns: u64,
    /// Number of blocking episodes.
    pub count: u64,
}
const _: () = assert!(core::mem::size_of::<OffCpuValue>() == 16);

/// What the kernel remembers for a thread between switch-out and switch-in.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct OffCpuStart {
    /// `bpf_ktime_get_ns()` at switch-out.
    pub start_ns: u64,
    /// Generation (see [`Control`]) at switch-out; the stack ids in `key` belong to its slot.
    pub generation: u64,
    /// Aggregation key prepared at switch-out.
    pub key: SampleKey,
}
const _: () = assert!(core::mem::size_of::<OffCpuStart>() == 48);

/// Which off-CPU episodes are counted.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OffCpuKind {
    /// The thread left the CPU in a sleeping state (S or D): it waited for something.
    Voluntary = 0,
    /// The thread was preempted while runnable: it waited for a CPU.
    Involuntary = 1,
}

/// Single-entry control block written by userspace, read by every program invocation.
///
/// The programs write into map set `generation % SLOTS`. Userspace bumps `generation` to end a window,
/// waits for in-flight invocations, then drains the previous slot while the kernel fills the next one:
/// nothing that arrives during a drain is lost. Three slots rather than two so an off-CPU episode that
/// started in the previous window can still name stacks from that window's stack map (see agent `bpf::maps`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Control {
    /// Window counter; the active slot is `generation % SLOTS`.
    pub generation: u64,
    /// Minimum blocked time for an off-CPU episode to be aggregated.
    pub min_block_ns: u64,
    /// Non-zero: only processes present in the `PIDS` map are sampled.
    pub filter_pids: u32,
    /// Off-CPU episodes counted, an [`OffCpuKind`] value.
    pub offcpu_kind: u32,
    /// Byte offset of `prev_pid` in the `sched_switch` record (read from tracefs at load time).
    pub prev_pid_offset: u32,
    /// Byte offset of `prev_state` in the `sched_switch` record.
    pub prev_state_offset: u32,
    /// Byte offset of `next_pid` in the `sched_switch` record.
    pub next_pid_offset: u32,
    /// The `prev_state` bit meaning "preempted while runnable" (`TASK_REPORT_MAX`, read from tracefs).
    pub preempt_state_bit: u32,
}
const _: () = assert!(core::mem::size_of::<Control>() == 40);

/// Kind of a [`ProcEvent`].
pub mod proc_event {
    /// First sample of a process (or first since its last exec): capture its mappings now.
    pub const FIRST_SEEN: u32 = 1;
    /// The process called exec: mappings changed.
    pub const EXEC: u32 = 2;
    /// The process (thread group leader) exited.
    pub const EXIT: u32 = 3;
}

/// Process lifecycle notification sent through the `PROC_EVENTS` ring buffer.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct ProcEvent {
    /// One of [`proc_event`].
    pub kind: u32,
    /// Process id.
    pub tgid: u32,
    /// `bpf_ktime_get_ns()` when it happened.
    pub time_ns: u64,
}
const _: () = assert!(core::mem::size_of::<ProcEvent>() == 16);

/// Indexes of the per-CPU `STATS` counters. Every sample or event that is not aggregated lands in one.
pub mod stat {
    /// On-CPU samples aggregated (including those with a failed stack).
    pub const ONCPU_SAMPLES: u32 = 0;
    /// On-CPU samples of the idle task, not aggregated by design.
    pub const ONCPU_IDLE: u32 = 1;
    /// On-CPU samples lost because the counts map was full.
    pub const ONCPU_MAP_FULL: u32 = 2;
    /// User stacks lost to a stack-map bucket collision (the sample is kept without its user stack).
    pub const USER_STACK_COLLISION: u32 = 3;
    /// Kernel stacks lost to a collision.
    pub const KERNEL_STACK_COLLISION: u32 = 4;
    /// User stacks that failed for another reason (map full, fault).
    pub const USER_STACK_ERROR: u32 = 5;
    /// Kernel stacks that failed for another reason.
    pub const KERNEL_STACK_ERROR: u32 = 6;
    /// Process events lost because the ring buffer was full.
    pub const PROC_EVENTS_LOST: u32 = 7;
    /// Off-CPU switch-outs remembered.
    pub const OFFCPU_SWITCH_OUT: u32 = 8;
    /// Off-CPU episodes aggregated.
    pub const OFFCPU_EPISODES: u32 = 9;
    /// Off-CPU episodes shorter than `min_block_ns`, not aggregated by design.
    pub const OFFCPU_SHORT: u32 = 10;
    /// Switch-outs not remembered because the start map was full.
    pub const OFFCPU_START_FULL: u32 = 11;
    /// Episodes lost because the off-CPU counts map was full.
    pub const OFFCPU_MAP_FULL: u32 = 12;
    /// Remembered switch-outs of threads that exited before switching back in.
    pub const OFFCPU_UNMATCHED_EXIT: u32 = 13;
    /// Episodes longer than a window whose stacks had been recycled: time kept, stack unknown.
    pub const OFFCPU_STALE_STACK: u32 = 14;
    /// Number of counters.
    pub const COUNT: u32 = 15;
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all types are repr(C), Copy, and contain only integers with explicit padding.
    unsafe impl aya::Pod for super::SampleKey {}
    unsafe impl aya::Pod for super::OffCpuValue {}
    unsafe impl aya::Pod for super::OffCpuStart {}
    unsafe impl aya::Pod for super::Control {}
    unsafe impl aya::Pod for super::ProcEvent {}
}
