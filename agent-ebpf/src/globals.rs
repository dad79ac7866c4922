//! Settings fixed for the programs' lifetime, written by the agent at load time
//! (`EbpfLoader::set_global`, names in `sonde_abi::names::globals`). They live in read-only data, so
//! the verifier knows their values and prunes the branches they disable (an off-CPU kind, the pid
//! filter, an unwind mode) instead of every event paying for a map lookup and a test.

// The defaults below are placeholders: every value is set by the agent before loading. Reads are
// volatile so the compiler does not fold the placeholder into the code.
#[unsafe(no_mangle)]
static FILTER_PIDS: u32 = 0;
#[unsafe(no_mangle)]
static OFFCPU_KIND: u32 = 0;
#[unsafe(no_mangle)]
static MIN_BLOCK_NS: u64 = 0;
#[unsafe(no_mangle)]
static STANDARD_LAYOUT: u32 = 0;
#[unsafe(no_mangle)]
static PREV_PID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static PREV_STATE_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static NEXT_PID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static PREEMPT_STATE_BIT: u64 = 0;
#[unsafe(no_mangle)]
static UNWIND_MODE: u32 = 0;
#[unsafe(no_mangle)]
static REFRESH_INTERVAL_NS: u64 = 0;
#[unsafe(no_mangle)]
static KERNEL_LOG: u32 = 0;
#[unsafe(no_mangle)]
static PYTHON: u32 = 0;
#[unsafe(no_mangle)]
static RUBY: u32 = 0;
#[unsafe(no_mangle)]
static PHP: u32 = 0;
#[unsafe(no_mangle)]
static TASK_TP_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static TASK_STACK_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static GO: u32 = 0;
#[unsafe(no_mangle)]
static JAVA: u32 = 0;
#[unsafe(no_mangle)]
static THREAD_CTX: u32 = 0;
#[unsafe(no_mangle)]
static V8: u32 = 0;
#[unsafe(no_mangle)]
static TEST_FAIL_EXEC: u32 = 0;
#[unsafe(no_mangle)]
static VMA_LAYOUT: sonde_abi::VmaLayout = sonde_abi::VmaLayout {
    vm_start: 0,
    vm_end: 0,
    vm_pgoff: 0,
    vm_file: 0,
    f_inode: 0,
    i_ino: 0,
    i_sb: 0,
    s_dev: 0,
    vm_flags: 0,
    task_mm: 0,
    mm_start_code: 0,
    task_group_leader: 0,
    task_start_time: 0,
    fork_child_pid: 0,
    mmap_ret: 0,
};

macro_rules! getter {
    ($(#[$doc:meta])* $fn:ident, $global:ident, $ty:ty) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $fn() -> $ty {
            // SAFETY: a plain read of an initialised static.
            unsafe { core::ptr::read_volatile(&raw const $global) }
        }
    };
}

getter!(
    /// Only processes in `PIDS` are sampled.
    filter_pids, FILTER_PIDS, u32
);
getter!(
    /// Which off-CPU episodes count (`sonde_abi::OffCpuKind`).
    offcpu_kind, OFFCPU_KIND, u32
);
getter!(
    /// Shortest off-CPU episode aggregated.
    min_block_ns, MIN_BLOCK_NS, u64
);
getter!(
    /// `sched_switch` has the layout of every kernel since 4.x (fields read at constant offsets).
    standard_layout, STANDARD_LAYOUT, u32
);
getter!(
    /// Offset of `prev_pid` in the `sched_switch` record.
    prev_pid_offset, PREV_PID_OFFSET, u32
);
getter!(
    /// Offset of `prev_state`.
    prev_state_offset, PREV_STATE_OFFSET, u32
);
getter!(
    /// Offset of `next_pid`.
    next_pid_offset, NEXT_PID_OFFSET, u32
);
getter!(
    /// The "preempted" bit of `prev_state`.
    preempt_state_bit, PREEMPT_STATE_BIT, u64
);
getter!(
    /// `sonde_abi::unwind::mode`.
    unwind_mode, UNWIND_MODE, u32
);
getter!(
    /// Minimum time between two mapping refresh requests for one process.
    refresh_interval_ns, REFRESH_INTERVAL_NS, u64
);
getter!(
    /// Non-zero when Python frames are walked (`--python on`).
    python, PYTHON, u32
);
getter!(
    /// Non-zero when Ruby frames are walked (`--runtimes` with `ruby`).
    ruby, RUBY, u32
);
getter!(
    /// Non-zero when PHP frames are walked (`--runtimes` with `php`).
    php, PHP, u32
);
getter!(
    /// Offset of `thread.fsbase` in `task_struct`; 0 when unknown. x86_64.
    task_tp_offset, TASK_TP_OFFSET, u32
);
getter!(
    /// Offset of `stack` in `task_struct`; 0 when unknown. Read by the legacy object only.
    #[cfg_attr(not(feature = "legacy"), allow(dead_code))]
    task_stack_offset, TASK_STACK_OFFSET, u32
);
getter!(
    /// Non-zero when the labels of goroutines of processes in `GO_PROCS` are read.
    go_labels, GO, u32
);
getter!(
    /// Non-zero when the thread contexts of processes in `TC_PROCS` are read.
    thread_ctx, THREAD_CTX, u32
);
getter!(
    /// Non-zero when the Java frames of processes in `HS_PROCS` are walked.
    java_frames, JAVA, u32
);
getter!(
    /// Non-zero when the JavaScript frames of processes in `V8_PROCS` are walked.
    v8_frames, V8, u32
);
getter!(
    /// Non-zero when failed invocations are logged through aya-log (see `diag`).
    kernel_log, KERNEL_LOG, u32
);
getter!(
    /// Test hook: non-zero makes every run of the exec program fail (see `process::exec`).
    test_fail_exec, TEST_FAIL_EXEC, u32
);
getter!(
    /// Kernel structure offsets of the VMA lookup; `vm_file` 0 when unknown (the lookup is off).
    vma_layout, VMA_LAYOUT, sonde_abi::VmaLayout
);
