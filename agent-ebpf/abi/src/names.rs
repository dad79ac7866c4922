//! Names of the maps and load-time globals the two sides share. The kernel's statics carry exactly these
//! names (agent unit tests check the built object against `ALL_MAPS` and `globals::ALL`); the agent uses only these
//! constants, never strings of its own.

/// Control block (the generation).
pub const CONTROL: &str = "CONTROL";
/// Processes to sample when the pid filter is on.
pub const PIDS: &str = "PIDS";
/// What the relabel rules decided per process ([`crate::TargetRule`], by tgid).
pub const TARGETS: &str = "TARGETS";
/// Per-CPU credit of thinned targets (`u32`, by `tgid % crate::TARGET_SLOTS`).
pub const TARGET_CREDIT: &str = "TARGET_CREDIT";
/// Per-CPU counters, indexed by [`crate::stat`].
pub const STATS: &str = "STATS";
/// Processes already announced to userspace.
pub const SEEN: &str = "SEEN";
/// Process lifecycle events (ring buffer of [`crate::ProcEvent`]).
pub const PROC_EVENTS: &str = "PROC_EVENTS";
/// Threads currently off-CPU.
pub const OFFCPU_START: &str = "OFFCPU_START";
/// Off-CPU sampling settings, per CPU ([`crate::OffCpuSampling`]).
pub const OFFCPU_SAMPLING: &str = "OFFCPU_SAMPLING";
/// Per-thread off-CPU state ([`crate::ThreadSlot`]).
pub const OFFCPU_THREADS: &str = "OFFCPU_THREADS";
/// Counted switch-outs per process slot, per CPU (`u64`, written by the kernel).
pub const OFFCPU_PROCESS_SWITCHES: &str = "OFFCPU_PROCESS_SWITCHES";
/// Sampling probability per process slot ([`crate::ProcessSampling`], written by userspace).
pub const OFFCPU_PROCESS_SAMPLING: &str = "OFFCPU_PROCESS_SAMPLING";
/// Per-CPU staging of an off-CPU episode's start ([`crate::OffCpuStart`]) before its insert into
/// `OFFCPU_START`.
pub const OFFCPU_START_STAGING: &str = "OFFCPU_START_STAGING";
/// Per-CPU scratch space of the user-stack walk.
pub const UNWIND_SCRATCH: &str = "UNWIND_SCRATCH";
/// Per-CPU buffer a kernel stack is read into before it is hashed ([`crate::KernelStack`]).
pub const KSTACK_SCRATCH: &str = "KSTACK_SCRATCH";
/// Unwind rows, in blocks ([`crate::RowBlock`]).
pub const UNWIND_ROWS: &str = "UNWIND_ROWS";
/// Where each page of each unwind table is ([`crate::PageKey`] -> [`crate::PageEntry`]).
pub const UNWIND_PAGES: &str = "UNWIND_PAGES";
/// The distinct unwind rules of all tables ([`crate::UnwindRule`]), indexed by [`crate::PackedRow`].
pub const UNWIND_RULES: &str = "UNWIND_RULES";
/// Executable mappings per process ([`crate::ProcMappings`]).
pub const PROC_MAPPINGS: &str = "PROC_MAPPINGS";
/// Unwind tables of binary files by device and inode ([`crate::FileKey`] -> [`crate::FileTable`]), for
/// processes without `PROC_MAPPINGS` entries.
pub const FILE_TABLES: &str = "FILE_TABLES";
/// Executable file mappings recorded by the kernel for processes that exec'd while the agent ran
/// ([`crate::VmaMappings`]), by tgid.
pub const VMA_MAPPINGS: &str = "VMA_MAPPINGS";
/// Kernel log records (ring buffer), declared by `aya-log-ebpf` and read by `aya-log`; written only when
/// [`globals::KERNEL_LOG`] is set.
pub const AYA_LOGS: &str = "AYA_LOGS";
/// CPython settings per process ([`crate::python::PyProc`]), by tgid.
pub const PY_PROCS: &str = "PY_PROCS";
/// The thread state of each Python thread found so far, by tid (a cache the kernel fills).
pub const PY_THREADS: &str = "PY_THREADS";
/// CPython settings per binary file ([`crate::python::PyProc`] relative to the file's mapping), by
/// [`crate::FileKey`].
pub const PY_FILES: &str = "PY_FILES";

/// CRuby settings per process ([`crate::ruby::RbProc`]), by tgid.
pub const RB_PROCS: &str = "RB_PROCS";
/// PHP settings per process ([`crate::php::PhpProc`]), by tgid.
pub const PHP_PROCS: &str = "PHP_PROCS";

/// Goroutine-label settings per Go process ([`crate::go::GoProc`]), by tgid.
pub const GO_PROCS: &str = "GO_PROCS";
/// Goroutine label sets copied by the kernel ([`crate::go::LabelSet`]), by a hash of their content.
pub const SAMPLE_LABELS: &str = "SAMPLE_LABELS";
/// Per-CPU scratch space of a label copy (Go's labels, a thread context).
pub const LABEL_SCRATCH: &str = "LABEL_SCRATCH";
/// Thread-context settings per process publishing one ([`crate::thread_ctx::ThreadCtxProc`]), by
/// tgid.
pub const TC_PROCS: &str = "TC_PROCS";

/// HotSpot settings per JVM process ([`crate::hotspot::HsProc`]), by tgid.
pub const HS_PROCS: &str = "HS_PROCS";

/// V8 settings per Node.js process ([`crate::v8::V8Proc`]), by tgid.
pub const V8_PROCS: &str = "V8_PROCS";
/// Per-CPU run-time histogram of on-CPU samples by path (see [`crate::cost_path`]).
pub const SAMPLE_COST: &str = "SAMPLE_COST";
/// The on-CPU programs that walk a sample, by [`runtime_programs`] index: `sonde_on_cpu` only
/// picks one and tail-calls it.
pub const ONCPU_RUNTIMES: &str = "ONCPU_RUNTIMES";
/// The off-CPU programs, likewise for `sonde_off_cpu`.
pub const OFFCPU_RUNTIMES: &str = "OFFCPU_RUNTIMES";
/// Names of kernel addresses, written when userspace runs `sonde_kernel_names` (see
/// [`crate::kernel_names`]).
pub const KERNEL_NAMES: &str = "KERNEL_NAMES";

/// The programs that walk a sample: native frames, or a runtime's frames beside native ones. The
/// attached programs (`sonde_on_cpu`, `sonde_off_cpu`) only dispatch to one of these by a tail call,
/// so each is verified on its own, and a runtime's program is loaded (by userspace, into
/// [`ONCPU_RUNTIMES`] and [`OFFCPU_RUNTIMES`]) only once a process of its runtime is found: a host
/// without JVMs pays nothing at start for the Java walker.
pub mod runtime_programs {
    /// Native frames (and Python's, and Go's labels): loaded at start.
    pub const NATIVE: u32 = 0;
    /// Java frames (HotSpot).
    pub const JAVA: u32 = 1;
    /// JavaScript frames (V8).
    pub const V8: u32 = 2;
    /// Entries of each program array.
    pub const COUNT: u32 = 3;
    /// The on-CPU programs, by index.
    pub const ON_CPU: [&str; COUNT as usize] = [
        "sonde_on_cpu_native",
        "sonde_on_cpu_java",
        "sonde_on_cpu_v8",
    ];
    /// The off-CPU programs, by index.
    pub const OFF_CPU: [&str; COUNT as usize] = [
        "sonde_off_cpu_native",
        "sonde_off_cpu_java",
        "sonde_off_cpu_v8",
    ];
}

/// Kernel-stack maps, one per slot.
pub const KERNEL_STACKS: [&str; 3] = ["KSTACKS_0", "KSTACKS_1", "KSTACKS_2"];
/// User stacks of at most `SHALLOW_STACK_DEPTH` frames ([`crate::ShallowUserStack`]), one map per
/// slot.
pub const USER_STACKS: [&str; 3] = ["USTACKS_0", "USTACKS_1", "USTACKS_2"];
/// The stacks deeper than `SHALLOW_STACK_DEPTH`, per slot (ids with `unwind::DEEP_STACK`).
pub const DEEP_USER_STACKS: [&str; 3] = ["DSTACKS_0", "DSTACKS_1", "DSTACKS_2"];
/// On-CPU aggregations, one per slot.
pub const ONCPU: [&str; 3] = ["ONCPU_0", "ONCPU_1", "ONCPU_2"];
/// Off-CPU aggregations, one per slot.
pub const OFFCPU: [&str; 3] = ["OFFCPU_0", "OFFCPU_1", "OFFCPU_2"];

/// Every map of the object.
pub const ALL_MAPS: [&str; 52] = [
    CONTROL,
    PIDS,
    TARGETS,
    TARGET_CREDIT,
    STATS,
    SEEN,
    PROC_EVENTS,
    OFFCPU_START,
    OFFCPU_SAMPLING,
    OFFCPU_THREADS,
    OFFCPU_PROCESS_SWITCHES,
    OFFCPU_PROCESS_SAMPLING,
    OFFCPU_START_STAGING,
    UNWIND_SCRATCH,
    KSTACK_SCRATCH,
    UNWIND_ROWS,
    UNWIND_PAGES,
    UNWIND_RULES,
    PROC_MAPPINGS,
    FILE_TABLES,
    VMA_MAPPINGS,
    AYA_LOGS,
    PY_PROCS,
    PY_THREADS,
    PY_FILES,
    RB_PROCS,
    PHP_PROCS,
    GO_PROCS,
    SAMPLE_LABELS,
    LABEL_SCRATCH,
    TC_PROCS,
    HS_PROCS,
    V8_PROCS,
    SAMPLE_COST,
    ONCPU_RUNTIMES,
    OFFCPU_RUNTIMES,
    KERNEL_NAMES,
    KERNEL_STACKS[0],
    KERNEL_STACKS[1],
    KERNEL_STACKS[2],
    USER_STACKS[0],
    USER_STACKS[1],
    USER_STACKS[2],
    DEEP_USER_STACKS[0],
    DEEP_USER_STACKS[1],
    DEEP_USER_STACKS[2],
    ONCPU[0],
    ONCPU[1],
    ONCPU[2],
    OFFCPU[0],
    OFFCPU[1],
    OFFCPU[2],
];

/// Settings fixed for the programs' lifetime, set at load time (read-only data: the verifier prunes the
/// branches they disable).
pub mod globals {
    /// `u32`: non-zero when only processes in `PIDS` are sampled.
    pub const FILTER_PIDS: &str = "FILTER_PIDS";
    /// `u32`: an [`crate::OffCpuKind`] value.
    pub const OFFCPU_KIND: &str = "OFFCPU_KIND";
    /// `u64`: off-CPU episodes shorter than this are counted as short and dropped.
    pub const MIN_BLOCK_NS: &str = "MIN_BLOCK_NS";
    /// `u32`: non-zero when `sched_switch` has `prev_pid`, `prev_state` and `next_pid` at offsets 24,
    /// 32 and 56 (every kernel since 4.x): the program loads them at those constant offsets.
    pub const STANDARD_LAYOUT: &str = "STANDARD_LAYOUT";
    /// `u32`: byte offset of `prev_pid` in the `sched_switch` record (from tracefs).
    pub const PREV_PID_OFFSET: &str = "PREV_PID_OFFSET";
    /// `u32`: byte offset of `prev_state`.
    pub const PREV_STATE_OFFSET: &str = "PREV_STATE_OFFSET";
    /// `u32`: byte offset of `next_pid`.
    pub const NEXT_PID_OFFSET: &str = "NEXT_PID_OFFSET";
    /// `u64`: the `prev_state` bit meaning "preempted while runnable" (from tracefs).
    pub const PREEMPT_STATE_BIT: &str = "PREEMPT_STATE_BIT";
    /// `u32`: a [`crate::unwind::mode`] value.
    pub const UNWIND_MODE: &str = "UNWIND_MODE";
    /// `u64`: minimum time between two mapping refresh requests for one process, nanoseconds.
    pub const REFRESH_INTERVAL_NS: &str = "REFRESH_INTERVAL_NS";
    /// `u32`: non-zero when the Python frames of processes in `PY_PROCS` are walked (`--python on`).
    pub const PYTHON: &str = "PYTHON";
    /// `u32`: non-zero when the Ruby frames of processes in `RB_PROCS` are walked (`--runtimes`
    /// with `ruby`).
    pub const RUBY: &str = "RUBY";
    /// `u32`: non-zero when the PHP frames of processes in `PHP_PROCS` are walked (`--runtimes`
    /// with `php`).
    pub const PHP: &str = "PHP";
    /// `u32`: byte offset of `thread.fsbase` in the kernel's `task_struct` (from its BTF; x86_64), or 0
    /// when unknown.
    pub const TASK_TP_OFFSET: &str = "TASK_TP_OFFSET";
    /// `u32`: byte offset of `stack` in the kernel's `task_struct` (from its BTF), where the legacy
    /// object finds a task's saved user registers; 0 when unknown.
    pub const TASK_STACK_OFFSET: &str = "TASK_STACK_OFFSET";
    /// `u32`: non-zero when the labels of goroutines of processes in `GO_PROCS` are read
    /// (`--runtimes` with `go`).
    pub const GO: &str = "GO";
    /// `u32`: non-zero when Java frames of processes in `HS_PROCS` are walked (`--runtimes` with
    /// `java`).
    pub const JAVA: &str = "JAVA";
    /// `u32`: non-zero when the thread contexts of processes in `TC_PROCS` are read (`--runtimes`
    /// with `trace-context`).
    pub const THREAD_CTX: &str = "THREAD_CTX";
    /// `u32`: non-zero when JavaScript frames of processes in `V8_PROCS` are walked (`--runtimes`
    /// with `node`).
    pub const V8: &str = "V8";
    /// `u32`: non-zero when the programs log their failed invocations through aya-log
    /// ([`super::AYA_LOGS`]); at 0 the verifier prunes every log call.
    pub const KERNEL_LOG: &str = "KERNEL_LOG";
    /// `u32`, test hook: non-zero makes every run of the exec program fail (counted and logged), so a
    /// test can provoke a kernel failure on purpose. Never set in production.
    pub const TEST_FAIL_EXEC: &str = "TEST_FAIL_EXEC";
    /// [`crate::VmaLayout`]: kernel structure offsets for the VMA lookup (from BTF), all 0 when
    /// unknown (the lookup is off).
    pub const VMA_LAYOUT: &str = "VMA_LAYOUT";

    /// Every load-time global (the agent's test checks each is in the object's read-only data).
    pub const ALL: [&str; 22] = [
        FILTER_PIDS,
        OFFCPU_KIND,
        MIN_BLOCK_NS,
        STANDARD_LAYOUT,
        PREV_PID_OFFSET,
        PREV_STATE_OFFSET,
        NEXT_PID_OFFSET,
        PREEMPT_STATE_BIT,
        UNWIND_MODE,
        REFRESH_INTERVAL_NS,
        PYTHON,
        RUBY,
        PHP,
        TASK_TP_OFFSET,
        TASK_STACK_OFFSET,
        GO,
        JAVA,
        THREAD_CTX,
        V8,
        KERNEL_LOG,
        TEST_FAIL_EXEC,
        VMA_LAYOUT,
    ];
}
