//! The kernel/user ABI of sonde: every type, constant, map name and load-time global shared between the
//! eBPF programs and the agent.
//!
//! Rules (both sides compile this one file): `#[repr(C)]`, `Copy`, no `bool`, explicit padding, and a
//! compile-time size assertion per type so a layout change on one side cannot go unnoticed.
#![no_std]

pub mod appended;
pub mod go;
pub mod hotspot;
pub mod kernel_names;
pub mod labels;
pub mod names;
pub mod php;
pub mod python;
pub mod ruby;
pub mod runtime_frame;
pub mod thread_ctx;
pub mod tls;
pub mod unwind;
pub mod v8;

pub use unwind::{
    ExecMapping, FileKey, FileTable, PackedRow, PageEntry, PageKey, ProcMappings, RowBlock,
    ShallowUserStack, UnwindRow, UnwindRule, UserStack, VmaLayout, VmaMapping, VmaMappings,
};

/// Length of a task's `comm` as the kernel stores it.
pub const TASK_COMM_LEN: usize = 16;
/// Words per user stack, native and runtime frames together: javac's and the TypeScript
/// compiler's recursions run past perf's default of 127 frames (`perf_event_max_stack`). A native,
/// Go or Python frame takes one word, a Java or JavaScript frame two (`runtime_frame`), so 512 of
/// those fit. A power of two: the kernel masks indexes with it.
pub const MAX_STACK_DEPTH: usize = 1024;
const _: () = assert!(MAX_STACK_DEPTH.is_power_of_two());
/// Frames of the stacks stored in the user-stack maps ([`ShallowUserStack`]); deeper ones go to
/// the deep maps (`names::DEEP_USER_STACKS`, ids with [`unwind::DEEP_STACK`] set), so that the
/// many short stacks do not each take a deep stack's memory.
pub const SHALLOW_STACK_DEPTH: usize = 127;
/// Frames per kernel stack ([`KernelStack`]). Kernel stacks seen on busy hosts (syscalls, page faults,
/// exec, exit, the scheduler) hold 10 to 25 frames, an interrupt on top of them some 20 more. A stack
/// that fills all 64 may have been cut: userspace counts it (`kernel_stacks_full`).
pub const KERNEL_STACK_DEPTH: usize = 64;

/// Value of the kernel-stack maps: one kernel stack, keyed by a 31-bit hash of its frames
/// ([`SampleKey::kernel_stack_id`], whose negative values are statuses). A hash map rather than the
/// kernel's stack-trace map, which preallocates every entry at full depth (4.4 MB a slot at 8192
/// entries, for a few hundred stacks a window) and loses a stack to every bucket collision.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct KernelStack {
    /// A second, independent hash of the frames: a key collision shows as a mismatch here.
    pub check: u64,
    /// Return addresses, leaf first; zero after the last (the helper zeroes what it does not fill).
    pub ips: [u64; KERNEL_STACK_DEPTH],
}
const _: () = assert!(core::mem::size_of::<KernelStack>() == 8 + 8 * KERNEL_STACK_DEPTH);
/// Number of map sets the kernel writes in turn; see [`Control::generation`].
pub const SLOTS: u64 = 3;

/// Stack status meaning "no stack of this kind was taken" (e.g. the user stack of a kernel thread).
pub const STACK_NONE: i32 = -14; // -EFAULT, what bpf_get_stackid returns when there is nothing to walk
/// Stack status meaning the stack map bucket was taken by another stack (hash collision).
pub const STACK_COLLISION: i32 = -17; // -EEXIST
/// Stack status meaning the stacks of an off-CPU episode were in a map set already recycled.
pub const STACK_STALE: i32 = -116; // -ESTALE
/// Stack status meaning the stack could not be stored: its map was full.
pub const STACK_MAP_FULL: i32 = -7; // -E2BIG, what a full hash map returns
/// User stack status meaning the stack was stored: look up [`SampleKey::user_stack_id`].
pub const STACK_OK: i32 = 0;

/// Key of the in-kernel aggregation: one thread of one process (its id and name), one pair of
/// stacks, one label set.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SampleKey {
    /// Process id (the kernel's tgid).
    pub tgid: u32,
    /// Key of the kernel stack in the kernel-stack map of slot `stack_slot` (a 31-bit hash), or a
    /// negative status (see `STACK_*`).
    pub kernel_stack_id: i32,
    /// Key of the user stack in the user-stack map of slot `stack_slot` when `user_stack_status` is
    /// [`STACK_OK`]; 0 otherwise.
    pub user_stack_id: u64,
    /// [`STACK_OK`], or why there is no user stack (`STACK_*` or a negative errno).
    pub user_stack_status: i32,
    /// Which slot's stack maps the ids refer to (off-CPU episodes can span a slot change).
    pub stack_slot: u16,
    /// How many events each aggregated one stands for: the inverse of the probability it was
    /// tracked with (off-CPU sampling, see [`OffCpuSampling`]); 1 for on-CPU samples and for
    /// episodes tracked for sure.
    pub weight: u16,
    /// Thread name at sampling time, NUL padded.
    pub comm: [u8; TASK_COMM_LEN],
    /// Key in `SAMPLE_LABELS` of the sampled goroutine's labels; 0 without labels.
    pub labels: u64,
    /// Thread id (the kernel's pid of the task).
    pub tid: u32,
    /// Zero: the key is hashed with every byte, so no byte may be left undefined.
    pub _reserved: u32,
}
const _: () = assert!(core::mem::size_of::<SampleKey>() == 56);

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
const _: () = assert!(core::mem::size_of::<OffCpuStart>() == 72);

/// Per-CPU off-CPU sampling settings, rewritten by userspace every step (250 ms, after steps of 10,
/// 50 and 100 ms at start) as the switch rate changes so that stack walks stay within the budget
/// (`--offcpu-budget`).
///
/// An episode is tracked (timestamped and its stacks walked) with probability 1/`one_in`, drawn at
/// switch-out, or for sure when the thread's last tracked episode lasted at least `long_ns` (what was
/// long is likely long again, and rare long blocks must not be starved by storms of short ones). Once
/// the CPU has tracked `cap` episodes in the current step (a storm that began since userspace last
/// looked), the draw uses `overflow_one_in` instead until the next step. Every episode's key carries
/// the inverse probability it was drawn with, fixed before its length is known, so totals weighted by
/// it are unbiased estimates (Horvitz-Thompson).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct OffCpuSampling {
    /// Track when `bpf_get_prandom_u32() <= threshold`: `u32::MAX / one_in`, `u32::MAX` for 1.
    pub threshold: u32,
    /// The inverse probability (1 tracks every episode).
    pub one_in: u32,
    /// Episodes at least this long mark their thread as a long sleeper.
    pub long_ns: u64,
    /// Episodes this CPU may track in the current step before `overflow_one_in` applies.
    pub cap: u32,
    /// `u32::MAX / overflow_one_in`.
    pub overflow_threshold: u32,
    /// The inverse probability once `cap` is reached.
    pub overflow_one_in: u32,
    /// Written by the kernel: episodes tracked by random draw in the current step (userspace resets
    /// it with every write).
    pub tracked: u32,
}
const _: () = assert!(core::mem::size_of::<OffCpuSampling>() == 32);

/// Slots of the per-process off-CPU arrays (`OFFCPU_PROCESS_SWITCHES`, `OFFCPU_PROCESS_SAMPLING`,
/// indexed by `tgid % PROCESS_SLOTS`; processes sharing a slot share a budget). Small enough to sit in
/// the kernel's direct map and to be read whole four times a second for little.
pub const PROCESS_SLOTS: u32 = 1024;

/// The off-CPU sampling probability of the processes of one slot, written by userspace from their
/// switch rate: each process gets a fair share of the budget, so a storm in one process does not
/// lower the probability of another's rare blocks.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct ProcessSampling {
    /// `u32::MAX / one_in`.
    pub threshold: u32,
    /// The inverse probability; 0 until userspace has set it (the CPU's settings apply).
    pub one_in: u32,
}
const _: () = assert!(core::mem::size_of::<ProcessSampling>() == 8);

/// `TargetRule::keep` of a target sampled at the base frequency: every sample kept.
pub const TARGET_KEEP_ALL: u32 = 1 << 16;

/// What the relabel rules decided for one process (`TARGETS`, by tgid), written by userspace when
/// the process is first seen and again when its labels change. A process without an entry is
/// sampled at the base frequency (the rules keep it, or have not looked at it yet).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct TargetRule {
    /// Share of the base frequency's samples kept, in 1/65536 ([`TARGET_KEEP_ALL`] keeps every
    /// one): 0 drops the process before any stack is walked; 19 Hz at a base of 99 Hz is
    /// `19 * 65536 / 99`. Applied by a per-CPU credit counter (`TARGET_CREDIT`), so the kept
    /// share is exact to one sample per CPU, not a random draw.
    pub keep: u32,
}
const _: () = assert!(core::mem::size_of::<TargetRule>() == 4);

/// Slots of the per-CPU credit counters of thinned targets (`TARGET_CREDIT`, by `tgid % TARGET_SLOTS`).
pub const TARGET_SLOTS: u32 = 1024;

/// Slots of the per-thread off-CPU state array (`OFFCPU_THREADS`, indexed by `tid % THREAD_SLOTS`):
/// 32 KiB, small enough to be allocated in the kernel's direct map (no page-table walk when cold).
pub const THREAD_SLOTS: u32 = 4096;

/// Per-thread off-CPU state, shared by the threads whose ids fall in one slot.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct ThreadSlot {
    /// The thread whose last tracked episode was long (its next one is tracked for sure), or 0.
    pub long_tid: u32,
    /// Tracked episodes of the slot's threads not yet ended: 0 means a switch-in needs no lookup.
    pub pending: u32,
}
const _: () = assert!(core::mem::size_of::<ThreadSlot>() == 8);

/// Which off-CPU episodes are counted.
#[repr(u32)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OffCpuKind {
    /// The thread left the CPU in a sleeping state (S or D): it waited for something.
    Voluntary = 0,
    /// The thread was preempted while runnable: it waited for a CPU.
    Involuntary = 1,
}

/// Single-entry control block written by userspace: only what changes while the programs run. Settings
/// fixed for the programs' lifetime are load-time globals (see [`names::globals`]).
///
/// The programs write into map set `generation % SLOTS`. Userspace bumps `generation` to end a window,
/// waits for in-flight invocations, then drains the previous slot while the kernel fills the next one:
/// nothing that arrives during a drain is lost. Three slots rather than two so an off-CPU episode that
/// started in the previous window can still name stacks from that window's stack maps.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Control {
    /// Window counter; the active slot is `generation % SLOTS`.
    pub generation: u64,
}
const _: () = assert!(core::mem::size_of::<Control>() == 8);

/// Kind of a [`ProcEvent`].
pub mod proc_event {
    /// First sample of a process (or first since its last exec): capture its mappings now.
    pub const FIRST_SEEN: u32 = 1;
    /// The process called exec: mappings changed.
    pub const EXEC: u32 = 2;
    /// The process (thread group leader) exited.
    pub const EXIT: u32 = 3;
    /// A sample's code address fell outside every mapping the kernel knows for the process (a library
    /// loaded, or code mapped, after the mappings were read): read them again.
    pub const MAPPINGS_STALE: u32 = 4;
    /// A Python frame named a code object this CPU had not seen in the process lately: read it now,
    /// while the process lives ([`super::ProcEvent::address`]), so a process that exits before the
    /// window ends keeps its Python names. The event carries the addresses of the object's name
    /// and file name strings, read by the walk ([`super::ProcEvent::data`],
    /// [`super::ProcEvent::extra`]), and the ring record is a [`crate::python::CodeEvent`] with
    /// copies of both: a module's code is freed once it ran, often before userspace reads it, and
    /// its name and file strings may go with it.
    pub const PYTHON_CODE: u32 = 5;
    /// A runtime frame (of any runtime: a Java method or compiled code, a JavaScript function or
    /// code object) named an object this CPU had not announced lately ([`super::ProcEvent::address`]
    /// is the frame's head word, [`super::ProcEvent::data`] its data word, see
    /// [`crate::runtime_frame`]; its kind says which runtime): read it now, while it lives (a class
    /// loaded, code not freed, an object not moved by a garbage collector, the process alive), so it
    /// keeps its name if it goes before the window ends.
    pub const RUNTIME_FRAME: u32 = 6;
    /// A Ruby frame named an instruction sequence body this CPU had not announced lately
    /// ([`super::ProcEvent::address`]): read it now, while it lives (code compiled by `eval` is
    /// freed once run).
    pub const RUBY_ISEQ: u32 = 7;
    /// A PHP frame named a function this CPU had not announced lately
    /// ([`super::ProcEvent::address`]): read it now, while it lives (a closure's copy, code run by
    /// `eval`, a worker's request ending).
    pub const PHP_FUNCTION: u32 = 8;

    /// Whether events of `kind` announce an object a runtime reads while it lives (handed to the
    /// runtime of the process), not a change of the process.
    pub const fn is_announcement(kind: u32) -> bool {
        matches!(kind, PYTHON_CODE | RUNTIME_FRAME | RUBY_ISEQ | PHP_FUNCTION)
    }
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
    /// The code object's address ([`proc_event::PYTHON_CODE`]), the runtime frame's head word
    /// ([`proc_event::RUNTIME_FRAME`]), the iseq body's address ([`proc_event::RUBY_ISEQ`]); 0
    /// otherwise.
    pub address: u64,
    /// The runtime frame's data word ([`proc_event::RUNTIME_FRAME`]); the code object's name
    /// (`co_qualname`, `co_name` before 3.11) as the walk read it ([`proc_event::PYTHON_CODE`]); 0
    /// otherwise.
    pub data: u64,
    /// The code object's file name (`co_filename`) as the walk read it
    /// ([`proc_event::PYTHON_CODE`]); 0 otherwise.
    pub extra: u64,
}
const _: () = assert!(core::mem::size_of::<ProcEvent>() == 40);

/// Indexes of the per-CPU `STATS` counters. Every sample or event that is not aggregated lands in one.
pub mod stat {
    /// On-CPU samples aggregated (including those with a failed stack).
    pub const ONCPU_SAMPLES: u32 = 0;
    /// On-CPU samples of the idle task, not aggregated by design.
    pub const ONCPU_IDLE: u32 = 1;
    /// On-CPU samples lost because the counts map was full.
    pub const ONCPU_MAP_FULL: u32 = 2;
    /// User stacks lost to a collision of their key (the sample is kept without its user stack).
    pub const USER_STACK_COLLISION: u32 = 3;
    /// Kernel stacks lost to a key collision (another stack under the same 31-bit hash).
    pub const KERNEL_STACK_COLLISION: u32 = 4;
    /// User stacks that could not be stored (user-stack map full).
    pub const USER_STACK_ERROR: u32 = 5;
    /// Kernel stacks that failed for another reason.
    pub const KERNEL_STACK_ERROR: u32 = 6;
    /// Process events lost because the ring buffer was full.
    pub const PROC_EVENTS_LOST: u32 = 7;
    /// Off-CPU episodes tracked (timestamped, stacks walked).
    pub const OFFCPU_SWITCH_OUT: u32 = 8;
    /// Off-CPU episodes aggregated.
    pub const OFFCPU_EPISODES: u32 = 9;
    /// Off-CPU episodes shorter than the minimum block time, not aggregated by design.
    pub const OFFCPU_SHORT: u32 = 10;
    /// Switch-outs not remembered because the start map was full.
    pub const OFFCPU_START_FULL: u32 = 11;
    /// Episodes lost because the off-CPU counts map was full.
    pub const OFFCPU_MAP_FULL: u32 = 12;
    /// Remembered switch-outs of threads that exited before switching back in.
    pub const OFFCPU_UNMATCHED_EXIT: u32 = 13;
    /// Episodes longer than a window whose stacks had been recycled: time kept, stack unknown.
    pub const OFFCPU_STALE_STACK: u32 = 14;
    /// User-stack walks that reached a thread root (a return address of 0, or a row saying the return
    /// address is undefined: `_start`, `clone3`).
    pub const WALK_ROOT: u32 = 15;
    /// Walks cut at [`crate::MAX_STACK_DEPTH`] frames.
    pub const WALK_DEPTH: u32 = 16;
    /// Walks cut by unreadable stack memory.
    pub const WALK_READ_FAULT: u32 = 17;
    /// Walks cut at code without an unwind table (`--unwind tables` only; `auto` falls back instead).
    pub const WALK_NO_TABLE: u32 = 18;
    /// Walks cut at an unwind rule the kernel cannot evaluate.
    pub const WALK_UNSUPPORTED: u32 = 19;
    /// Walks ended by a frame-pointer chain ending (rbp 0): complete or not is judged by symbol names.
    pub const WALK_FP_END: u32 = 20;
    /// Walks cut by a frame that cannot be a caller (stack pointer not growing, address 0 or in kernel).
    pub const WALK_BAD_FRAME: u32 = 21;
    /// Frames produced by every walk (frames per stack = this / walks).
    pub const WALK_FRAMES: u32 = 22;
    /// Walks of processes whose mappings the kernel does not know yet: frame pointers only.
    pub const FALLBACK_NO_PROCESS: u32 = 23;
    /// Frames stepped by frame pointer because their binary's table is not loaded (not built yet, or
    /// evicted).
    pub const FALLBACK_NO_TABLE: u32 = 24;
    /// Frames stepped by frame pointer because their code has no unwind information (JIT code,
    /// assembly without CFI, a gap between FDEs).
    pub const FALLBACK_NO_INFO: u32 = 25;
    /// Requests sent to userspace to read a process's mappings again.
    pub const MAPPINGS_REFRESH: u32 = 26;
    /// Program invocations that failed before doing their job (a map or context read failed).
    pub const PROGRAM_ERRORS: u32 = 27;
    /// Switch-outs of the counted kind (voluntary or involuntary) seen, tracked or not.
    pub const OFFCPU_ELIGIBLE: u32 = 28;
    /// Of the tracked episodes, those tracked for sure because the thread's last one was long.
    pub const OFFCPU_TRACKED_LONG: u32 = 29;
    /// Sum of the weights of tracked episodes (the switches they stand for).
    pub const OFFCPU_WEIGHT: u32 = 30;
    /// Stacks of CPython processes whose Python frames were walked (see [`crate::python`]).
    pub const PY_WALKS: u32 = 31;
    /// Python frames stored by those walks (frames per stack = this / walks).
    pub const PY_FRAMES: u32 = 32;
    /// Walks of threads with no Python code running (no current frame): not a failure.
    pub const PY_IDLE: u32 = 33;
    /// Walks that failed: the sampled thread's state was not found among the interpreter's threads.
    pub const PY_NO_THREAD: u32 = 34;
    /// Walks that failed: interpreter memory (runtime, thread state or a frame) was unreadable.
    pub const PY_READ_FAULT: u32 = 35;
    /// Walks cut because the stack was full (`MAX_STACK_DEPTH` native and Python frames together).
    pub const PY_TRUNCATED: u32 = 36;
    /// Walks of processes without mapping entries whose frames were found through the task's VMAs
    /// and `FILE_TABLES` (a process userspace has not captured yet, or never will: it lived
    /// milliseconds).
    pub const VMA_WALKS: u32 = 37;
    /// Frames of such walks in a VMA whose file has no table (anonymous or JIT code, a binary not seen
    /// yet): stepped by frame pointer.
    pub const VMA_NO_TABLE: u32 = 38;
    /// Frames of such walks outside every executable file mapping the kernel recorded (anonymous or
    /// JIT code, or more mappings than it keeps): stepped by frame pointer.
    pub const VMA_MISSED: u32 = 39;
    /// Executable file mappings the kernel could not record (the address space was locked, or the
    /// process has more than `MAX_VMA_MAPPINGS`), or processes it could not record at all (map full).
    pub const VMA_RECORD_FAILED: u32 = 40;
    /// Walks of exiting processes whose address space was gone (see `unwind::outcome::EXITING`).
    pub const WALK_EXITING: u32 = 41;
    /// Of the [`VMA_WALKS`], those that reached a thread root: the coverage of processes sampled
    /// before userspace captured them (short-lived ones), apart from the rest.
    pub const VMA_WALK_ROOT: u32 = 42;
    /// User-stack walks by the age of their process (since its fork; for a build tool, its exec),
    /// one counter per [`AGE_BUCKET_NS`] bucket: coverage of short-lived processes, apart from the
    /// rest, so an operator sees if the gap of their first milliseconds returns.
    pub const AGE_WALKS: u32 = 43;
    /// Of the [`AGE_WALKS`] of each bucket, those that reached a thread root.
    pub const AGE_WALK_ROOT: u32 = AGE_WALKS + AGE_BUCKETS;
    /// Process-age buckets of [`AGE_WALKS`].
    pub const AGE_BUCKETS: u32 = 5;
    /// Upper bounds of the first four age buckets (1 ms, 10 ms, 100 ms, 1 s); the last is older.
    pub const AGE_BUCKET_NS: [u64; AGE_BUCKETS as usize - 1] =
        [1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    /// Samples of Go processes whose goroutine had labels, copied (see [`crate::go`]).
    pub const GO_LABELED: u32 = AGE_WALK_ROOT + AGE_BUCKETS;
    /// Samples of Go processes whose labels were cut to fit (more than `MAX_LABELS`, or a key or
    /// value longer than kept).
    pub const GO_LABELS_CUT: u32 = GO_LABELED + 1;
    /// Samples of Go processes whose goroutine chain or labels could not be read.
    pub const GO_LABELS_FAULT: u32 = GO_LABELED + 2;
    /// Stacks of JVM processes (with `HS_PROCS` settings) walked (see [`crate::hotspot`]).
    pub const JAVA_WALKS: u32 = GO_LABELED + 3;
    /// Java frames stored by those walks (frames per stack = this / walks).
    pub const JAVA_FRAMES: u32 = JAVA_WALKS + 1;
    /// Walks cut at a pc inside a code heap whose code blob the segment map did not lead to (the
    /// blob was being freed or moved, or the map was read mid-update).
    pub const JAVA_NO_BLOB: u32 = JAVA_WALKS + 2;
    /// Walks cut because a code blob, its name or an interpreter frame was unreadable.
    pub const JAVA_READ_FAULT: u32 = JAVA_WALKS + 3;
    /// Walks cut at a Java frame that could not be stepped: an interpreter frame whose rbp is not
    /// near the stack pointer, or compiled code with no return address into the code cache where it
    /// must be.
    pub const JAVA_BAD_FRAME: u32 = JAVA_WALKS + 4;
    /// Compiled frames found deoptimized (returning into the deoptimization handler) whose original pc
    /// was recovered.
    pub const JAVA_DEOPT: u32 = JAVA_WALKS + 5;
    /// Stacks of Node.js processes (with `V8_PROCS` settings) walked (see [`crate::v8`]).
    pub const V8_WALKS: u32 = JAVA_WALKS + 6;
    /// JavaScript and V8 frames stored by those walks (frames per stack = this / walks).
    pub const V8_FRAMES: u32 = V8_WALKS + 1;
    /// Frames in V8 code (embedded builtins, or code without an unwind table) whose frame pointer
    /// led to no V8 frame (rbp not a frame pointer, its slots unreadable, or not a marker nor a
    /// `JSFunction`): stepped as native code instead.
    pub const V8_NOT_A_FRAME: u32 = V8_WALKS + 2;
    /// JavaScript frames stored with their function only ([`crate::v8::kind::FUNCTION`]): Sparkplug
    /// code, or a pc in none of its function's code the kernel could read.
    pub const V8_FUNCTION_ONLY: u32 = V8_WALKS + 3;
    /// Walks of processes inside `execve` between two images (see `unwind::outcome::EXECING`).
    pub const WALK_EXECING: u32 = V8_WALKS + 4;
    /// Samples (and off-CPU episodes) of JVM or Node.js processes walked with native steps only,
    /// because their runtime's program was not loaded yet ([`crate::names::runtime_programs`]).
    pub const RUNTIME_PROGRAM_PENDING: u32 = V8_WALKS + 5;
    /// On-CPU samples of processes the relabel rules drop, filtered before any stack was taken.
    pub const TARGET_DROPPED: u32 = V8_WALKS + 6;
    /// On-CPU samples not kept because their target samples below the base frequency.
    pub const TARGET_THINNED: u32 = V8_WALKS + 7;
    /// Off-CPU switch-outs of processes the relabel rules drop, not tracked.
    pub const TARGET_OFFCPU_DROPPED: u32 = V8_WALKS + 8;
    /// CPython processes given their settings by the kernel as they mapped an interpreter binary
    /// userspace had found before (`PY_FILES`): walked from their first sample.
    pub const PY_BY_BINARY: u32 = V8_WALKS + 9;
    /// Samples of processes publishing a thread context (`TC_PROCS`) whose thread was in a span:
    /// labelled with its trace and span (see [`crate::thread_ctx`]).
    pub const TC_LABELED: u32 = V8_WALKS + 10;
    /// Samples of those processes whose thread published no context (a null pointer, no trace id,
    /// or a DTV the thread never filled for the module): outside any span.
    pub const TC_NONE: u32 = V8_WALKS + 11;
    /// Samples whose record was being written (`valid` 0) or replaced while it was read: kept
    /// without the context rather than with a torn one.
    pub const TC_TORN: u32 = V8_WALKS + 12;
    /// Samples whose thread pointer, DTV, variable or record could not be read.
    pub const TC_FAULT: u32 = V8_WALKS + 13;
    /// Labelled samples that lost attributes: more than `MAX_ATTRS`, a key the process's key map
    /// does not name, or a value longer than kept.
    pub const TC_CUT: u32 = V8_WALKS + 14;

    /// The counter of walks ending in `outcome` (`unwind::outcome`); every outcome has one.
    pub const fn walk_counter(outcome: u32) -> u32 {
        use crate::unwind::outcome;
        match outcome {
            outcome::ROOT => WALK_ROOT,
            outcome::DEPTH => WALK_DEPTH,
            outcome::READ_FAULT => WALK_READ_FAULT,
            outcome::NO_TABLE => WALK_NO_TABLE,
            outcome::UNSUPPORTED => WALK_UNSUPPORTED,
            outcome::FP_END => WALK_FP_END,
            outcome::EXITING => WALK_EXITING,
            outcome::EXECING => WALK_EXECING,
            _ => WALK_BAD_FRAME,
        }
    }
    /// Stacks of CRuby processes (`RB_PROCS`) whose Ruby frames were walked.
    pub const RB_WALKS: u32 = V8_WALKS + 15;
    /// Ruby frames stored by those walks.
    pub const RB_FRAMES: u32 = V8_WALKS + 16;
    /// Ruby walks of threads with no execution context (not a Ruby thread, or one not started).
    pub const RB_NO_CONTEXT: u32 = V8_WALKS + 17;
    /// Ruby walks that ended on unreadable VM memory.
    pub const RB_READ_FAULT: u32 = V8_WALKS + 18;
    /// Ruby walks cut because the stack was full (or past the frames one walk reads).
    pub const RB_TRUNCATED: u32 = V8_WALKS + 19;
    /// Stacks of PHP processes (`PHP_PROCS`) whose PHP frames were walked.
    pub const PHP_WALKS: u32 = V8_WALKS + 20;
    /// PHP frames stored by those walks.
    pub const PHP_FRAMES: u32 = V8_WALKS + 21;
    /// PHP walks of threads running no PHP code (an idle php-fpm worker, start-up, shutdown).
    pub const PHP_NO_CONTEXT: u32 = V8_WALKS + 22;
    /// PHP walks that ended on unreadable executor memory.
    pub const PHP_READ_FAULT: u32 = V8_WALKS + 23;
    /// PHP walks cut because the stack was full (or past the frames one walk reads).
    pub const PHP_TRUNCATED: u32 = V8_WALKS + 24;
    /// Number of counters.
    pub const COUNT: u32 = V8_WALKS + 25;
}

/// What an on-CPU sample's BPF run time is charged to in `SAMPLE_COST`: the walker that did the most
/// (a runtime's frames over native tables over frame pointers), so each path's cost has its own
/// distribution, as issue targets and `bpf_stats` (one mean over every run) cannot tell them apart.
pub mod cost_path {
    /// No user stack was walked (a kernel thread).
    pub const KERNEL: u32 = 0;
    /// Native frames by frame pointers only (`--unwind fp`, or a process not captured yet).
    pub const FRAME_POINTERS: u32 = 1;
    /// Native frames with unwind tables.
    pub const TABLES: u32 = 2;
    /// The walk stored CPython frames.
    pub const PYTHON: u32 = 3;
    /// The walk stored Java frames.
    pub const JAVA: u32 = 4;
    /// The walk stored JavaScript (V8) frames.
    pub const V8: u32 = 5;
    /// The walk stored CRuby frames.
    pub const RUBY: u32 = 6;
    /// The walk stored PHP frames.
    pub const PHP: u32 = 7;
    /// Number of paths.
    pub const COUNT: u32 = 8;
    /// Each path's name in reports, by index.
    pub const NAMES: [&str; COUNT as usize] = [
        "kernel",
        "frame_pointers",
        "tables",
        "python",
        "java",
        "v8",
        "ruby",
        "php",
    ];
    /// Buckets per path: `BUCKET_NS` wide, the last one holding everything longer.
    pub const BUCKETS: u32 = 256;
    /// Width of a bucket, ns: fine enough to tell 1.6 µs from 2 µs, wide enough for 64 µs in all.
    pub const BUCKET_NS: u64 = 250;
    /// One recorded sample in this many (per CPU) is timed.
    pub const TIMED_EVERY: u64 = 8;
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all types are repr(C), Copy, and contain only integers with explicit padding.
    unsafe impl aya::Pod for super::SampleKey {}
    unsafe impl aya::Pod for super::OffCpuValue {}
    unsafe impl aya::Pod for super::OffCpuStart {}
    unsafe impl aya::Pod for super::Control {}
    unsafe impl aya::Pod for super::ProcEvent {}
    unsafe impl aya::Pod for super::UnwindRow {}
    unsafe impl aya::Pod for super::RowBlock {}
    unsafe impl aya::Pod for super::PackedRow {}
    unsafe impl aya::Pod for super::UnwindRule {}
    unsafe impl aya::Pod for super::PageKey {}
    unsafe impl aya::Pod for super::PageEntry {}
    unsafe impl aya::Pod for super::ExecMapping {}
    unsafe impl aya::Pod for super::FileKey {}
    unsafe impl aya::Pod for super::FileTable {}
    unsafe impl aya::Pod for super::VmaLayout {}
    unsafe impl aya::Pod for super::VmaMapping {}
    unsafe impl aya::Pod for super::VmaMappings {}
    unsafe impl aya::Pod for super::thread_ctx::ThreadCtxProc {}
    unsafe impl aya::Pod for super::ProcMappings {}
    unsafe impl aya::Pod for super::UserStack {}
    unsafe impl aya::Pod for super::ShallowUserStack {}
    unsafe impl aya::Pod for super::KernelStack {}
    unsafe impl aya::Pod for super::OffCpuSampling {}
    unsafe impl aya::Pod for super::ThreadSlot {}
    unsafe impl aya::Pod for super::ProcessSampling {}
    unsafe impl aya::Pod for super::TargetRule {}
    unsafe impl aya::Pod for super::python::PyProc {}
    unsafe impl aya::Pod for super::ruby::RbProc {}
    unsafe impl aya::Pod for super::php::PhpProc {}
    unsafe impl aya::Pod for super::go::GoProc {}
    unsafe impl aya::Pod for super::go::LabelSet {}
    unsafe impl aya::Pod for super::hotspot::HsProc {}
    unsafe impl aya::Pod for super::v8::V8Proc {}
    unsafe impl aya::Pod for super::kernel_names::KernelName {}
}
