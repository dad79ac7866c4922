//! One figure per kernel counter (`sonde_abi::stat`), in index order: each is the counter's increase
//! in the window, summed over CPUs, and a series of `sonde_kernel_events{event="<key>"}`; some are
//! also series of the drop, walk and process-age families. A runtime's counters are declared with
//! the runtime; a test checks that every counter of the ABI is declared once, here or there.

use sonde_abi::stat;

use super::{Figure, Kind, Series, Source};

const fn kernel(key: &'static str, stat: u32, help: &'static str) -> Figure {
    Figure {
        key,
        kind: Kind::Counter,
        unit: super::Unit::None,
        help,
        publish: super::Publish::Own,
        heartbeat: None,
        logged: false,
        source: Source::Kernel(stat),
    }
}

macro_rules! series {
    ($family:literal, $label:literal, $value:literal) => {
        &[Series {
            family: $family,
            labels: &[($label, $value)],
        }]
    };
}

/// A reason of `sonde_dropped`.
macro_rules! dropped {
    ($reason:literal) => {
        series!("sonde_dropped", "reason", $reason)
    };
}

/// An outcome of `sonde_stack_walks`.
macro_rules! walk {
    ($outcome:literal) => {
        series!("sonde_stack_walks", "outcome", $outcome)
    };
}

/// A bucket of `sonde_stack_walks_by_process_age` (`crate::bpf::drain::AGE_BUCKETS`).
macro_rules! age {
    ($age:literal, $outcome:literal) => {
        &[Series {
            family: "sonde_stack_walks_by_process_age",
            labels: &[("age", $age), ("outcome", $outcome)],
        }]
    };
}

/// Every kernel counter but the runtimes' (declared with their runtime, `crate::runtimes::figures`),
/// in `stat` index order (a test checks the order, and that each counter is declared once).
pub(crate) static KERNEL: &[Figure] = &[
    kernel(
        "oncpu_samples",
        stat::ONCPU_SAMPLES,
        "On-CPU samples aggregated in the kernel.",
    ),
    kernel(
        "oncpu_idle",
        stat::ONCPU_IDLE,
        "On-CPU samples of the idle task, not aggregated by design.",
    ),
    kernel(
        "oncpu_map_full",
        stat::ONCPU_MAP_FULL,
        "On-CPU samples lost: the counts map was full.",
    )
    .at(dropped!("oncpu_map_full")),
    kernel(
        "user_stack_collision",
        stat::USER_STACK_COLLISION,
        "User stacks lost to a collision of their key.",
    )
    .at(dropped!("user_stack_collision")),
    kernel(
        "kernel_stack_collision",
        stat::KERNEL_STACK_COLLISION,
        "Kernel stacks lost to a collision of their key (another stack under the same 31-bit hash).",
    )
    .at(dropped!("kernel_stack_collision")),
    kernel(
        "user_stack_error",
        stat::USER_STACK_ERROR,
        "User stacks that could not be stored (map full).",
    )
    .at(dropped!("user_stack_error")),
    kernel(
        "kernel_stack_error",
        stat::KERNEL_STACK_ERROR,
        "Kernel stacks that failed for another reason.",
    )
    .at(dropped!("kernel_stack_error")),
    kernel(
        "proc_events_lost",
        stat::PROC_EVENTS_LOST,
        "Process events lost: the ring buffer was full.",
    )
    .at(dropped!("process_events_lost")),
    kernel(
        "offcpu_switch_out",
        stat::OFFCPU_SWITCH_OUT,
        "Off-CPU episodes tracked (stacks walked).",
    )
    .logged(),
    kernel(
        "offcpu_episodes",
        stat::OFFCPU_EPISODES,
        "Off-CPU episodes aggregated.",
    ),
    kernel(
        "offcpu_short",
        stat::OFFCPU_SHORT,
        "Off-CPU episodes shorter than the minimum block time, not aggregated by design.",
    ),
    kernel(
        "offcpu_start_full",
        stat::OFFCPU_START_FULL,
        "Switch-outs not remembered: the start map was full.",
    )
    .at(dropped!("offcpu_start_full")),
    kernel(
        "offcpu_map_full",
        stat::OFFCPU_MAP_FULL,
        "Off-CPU episodes lost: the counts map was full.",
    )
    .at(dropped!("offcpu_map_full")),
    kernel(
        "offcpu_unmatched_exit",
        stat::OFFCPU_UNMATCHED_EXIT,
        "Remembered switch-outs of threads that exited before switching back in.",
    ),
    kernel(
        "offcpu_stale_stack",
        stat::OFFCPU_STALE_STACK,
        "Off-CPU episodes longer than the stack retention: time kept, stack unknown.",
    ),
    kernel(
        "walk_root",
        stat::WALK_ROOT,
        "User-stack walks that reached a thread root (complete).",
    )
    .at(walk!("root")),
    kernel(
        "walk_depth",
        stat::WALK_DEPTH,
        "User-stack walks cut at the depth limit (1,024 words, sonde_abi::MAX_STACK_DEPTH).",
    )
    .at(walk!("depth")),
    kernel(
        "walk_read_fault",
        stat::WALK_READ_FAULT,
        "User-stack walks cut by unreadable stack memory.",
    )
    .at(walk!("read_fault")),
    kernel(
        "walk_no_table",
        stat::WALK_NO_TABLE,
        "User-stack walks cut at code without an unwind table (--unwind tables).",
    )
    .at(walk!("no_table")),
    kernel(
        "walk_unsupported",
        stat::WALK_UNSUPPORTED,
        "User-stack walks cut at an unwind rule the kernel cannot evaluate.",
    )
    .at(walk!("unsupported")),
    kernel(
        "walk_fp_end",
        stat::WALK_FP_END,
        "User-stack walks ended by a frame-pointer chain ending (rbp 0).",
    )
    .at(walk!("fp_end")),
    kernel(
        "walk_bad_frame",
        stat::WALK_BAD_FRAME,
        "User-stack walks cut by a frame that cannot be a caller.",
    )
    .at(walk!("bad_frame")),
    kernel(
        "walk_frames",
        stat::WALK_FRAMES,
        "Frames produced by every user-stack walk.",
    ),
    kernel(
        "fallback_no_process",
        stat::FALLBACK_NO_PROCESS,
        "Walks of processes whose mappings the kernel does not know yet: frame pointers only.",
    ),
    kernel(
        "fallback_no_table",
        stat::FALLBACK_NO_TABLE,
        "Frames stepped by frame pointer: their binary's table is not loaded.",
    ),
    kernel(
        "fallback_no_info",
        stat::FALLBACK_NO_INFO,
        "Frames stepped by frame pointer: their code has no unwind information.",
    ),
    kernel(
        "mappings_refresh",
        stat::MAPPINGS_REFRESH,
        "Requests to userspace to read a process's mappings again.",
    ),
    kernel(
        "program_errors",
        stat::PROGRAM_ERRORS,
        "Program invocations that failed before doing their job.",
    )
    .at(dropped!("program_error")),
    kernel(
        "offcpu_eligible",
        stat::OFFCPU_ELIGIBLE,
        "Switch-outs of the counted kind seen, tracked or not.",
    )
    .logged(),
    kernel(
        "offcpu_tracked_long",
        stat::OFFCPU_TRACKED_LONG,
        "Off-CPU episodes tracked for sure because the thread's last one was long.",
    ),
    kernel(
        "offcpu_weight",
        stat::OFFCPU_WEIGHT,
        "Switches the tracked off-CPU episodes stand for (sum of their weights).",
    ),
    kernel(
        "vma_walks",
        stat::VMA_WALKS,
        "Walks of processes not captured yet, through the mappings the kernel recorded.",
    ),
    kernel(
        "vma_no_table",
        stat::VMA_NO_TABLE,
        "Frames of such walks in a file without a table: stepped by frame pointer.",
    ),
    kernel(
        "vma_missed",
        stat::VMA_MISSED,
        "Frames of such walks outside every recorded file mapping: stepped by frame pointer.",
    ),
    kernel(
        "vma_record_failed",
        stat::VMA_RECORD_FAILED,
        "Executable mappings (or processes) the kernel could not record.",
    ),
    kernel(
        "walk_exiting",
        stat::WALK_EXITING,
        "User-stack walks of exiting processes whose address space was gone.",
    )
    .at(walk!("exiting")),
    kernel(
        "vma_walk_root",
        stat::VMA_WALK_ROOT,
        "Walks of processes not captured yet that reached a thread root.",
    ),
    kernel(
        "walks_age_0_1ms",
        stat::AGE_WALKS,
        "User-stack walks of processes 0-1 ms old.",
    )
    .at(age!("0-1ms", "all")),
    kernel(
        "walks_age_1_10ms",
        stat::AGE_WALKS + 1,
        "User-stack walks of processes 1-10 ms old.",
    )
    .at(age!("1-10ms", "all")),
    kernel(
        "walks_age_10_100ms",
        stat::AGE_WALKS + 2,
        "User-stack walks of processes 10-100 ms old.",
    )
    .at(age!("10-100ms", "all")),
    kernel(
        "walks_age_100ms_1s",
        stat::AGE_WALKS + 3,
        "User-stack walks of processes 100 ms-1 s old.",
    )
    .at(age!("100ms-1s", "all")),
    kernel(
        "walks_age_1s_up",
        stat::AGE_WALKS + 4,
        "User-stack walks of processes 1 s old or older.",
    )
    .at(age!("1s+", "all")),
    kernel(
        "walk_root_age_0_1ms",
        stat::AGE_WALK_ROOT,
        "Complete walks of processes 0-1 ms old.",
    )
    .at(age!("0-1ms", "root")),
    kernel(
        "walk_root_age_1_10ms",
        stat::AGE_WALK_ROOT + 1,
        "Complete walks of processes 1-10 ms old.",
    )
    .at(age!("1-10ms", "root")),
    kernel(
        "walk_root_age_10_100ms",
        stat::AGE_WALK_ROOT + 2,
        "Complete walks of processes 10-100 ms old.",
    )
    .at(age!("10-100ms", "root")),
    kernel(
        "walk_root_age_100ms_1s",
        stat::AGE_WALK_ROOT + 3,
        "Complete walks of processes 100 ms-1 s old.",
    )
    .at(age!("100ms-1s", "root")),
    kernel(
        "walk_root_age_1s_up",
        stat::AGE_WALK_ROOT + 4,
        "Complete walks of processes 1 s old or older.",
    )
    .at(age!("1s+", "root")),
    kernel(
        "walk_execing",
        stat::WALK_EXECING,
        "User-stack walks of processes inside execve between two images (no user stack to walk).",
    )
    .at(walk!("execing")),
    kernel(
        "runtime_program_pending",
        stat::RUNTIME_PROGRAM_PENDING,
        "Samples and off-CPU episodes of JVM or Node.js processes walked with native frames only: their runtime's program was not loaded yet (it loads when the first process of the runtime is found).",
    ),
    kernel(
        "target_dropped_samples",
        stat::TARGET_DROPPED,
        "On-CPU samples of processes the relabel rules drop, filtered in the kernel before any stack was taken (by design).",
    ),
    kernel(
        "target_thinned_samples",
        stat::TARGET_THINNED,
        "On-CPU samples not kept because their target samples below the base frequency (`__sample_rate__`; by design).",
    ),
    kernel(
        "target_dropped_switches",
        stat::TARGET_OFFCPU_DROPPED,
        "Off-CPU switch-outs of processes the relabel rules drop, not tracked (by design).",
    ),
];
