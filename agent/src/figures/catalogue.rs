//! The figures userspace computes per window, in report order, and the help of the `/metrics`
//! families several figures share. A figure named here as a constant is read by code (the status
//! table, tests); the rest are only listed.

use sonde_abi::stat;

use super::{
    Figure, Input, Kind, Series, Unit, count, defect_share, good_share, labelled, mean, now, rate,
    so_far,
};

/// Families whose series are several figures (or run-time labels): name, help.
pub(crate) const FAMILIES: &[(&str, &str)] = &[
    (
        "sonde_samples",
        "Samples exported: on-CPU samples, and off-CPU episodes whose stacks were walked.",
    ),
    (
        "sonde_kernel_events",
        "The kernel programs' counters, summed over CPUs.",
    ),
    (
        "sonde_stack_walks",
        "User-stack walks by how they ended (root: complete).",
    ),
    (
        "sonde_stack_walks_by_process_age",
        "User-stack walks by the age of their process since fork, all of them and those reaching a thread root (complete): the coverage of short-lived processes.",
    ),
    (
        "sonde_dropped",
        "Samples, stacks and events lost, by reason.",
    ),
    (
        "sonde_targets",
        "Targets (processes) by whether the relabel rules keep them.",
    ),
    (
        "sonde_processes",
        "Processes the agent holds (seen), and those with samples in the last window.",
    ),
    (
        "sonde_process_captures",
        "Process captures by result (captured_exited: of those captured, the processes that exited while their files were opened); files mapped but not openable are counted as unopenable_file.",
    ),
    (
        "sonde_processes_unreadable",
        "Captures of processes whose code sonde may not read, so their frames stay unnamed: maps_denied (/proc/PID/maps refused: CAP_SYS_PTRACE), binary_unopenable (a mapped binary could not be opened: deleted or replaced without CAP_CHECKPOINT_RESTORE, or unreadable).",
    ),
    (
        "sonde_unmapped_frames",
        "Frames in no known file ([unmapped], weighted by samples), by reason: process_gone (exited before its mappings were read, walked by frame pointers), outside_mappings (in none of its known mappings), file_unknown (stored relative to a file no longer known).",
    ),
    (
        "sonde_debug_files",
        "Binaries symbolized, by where their symbols came from.",
    ),
    (
        "sonde_debuginfod_lookups",
        "debuginfod lookups by result (request: an HTTP request made).",
    ),
    (
        "sonde_unwind_tables",
        "Unwind tables by event: built, loaded from disk, failed (no usable table), evicted (over the budget).",
    ),
];

/// One series of a shared family: `series!("sonde_dropped", "reason", "stack_missing")`.
macro_rules! series {
    ($family:literal, $label:literal, $value:literal) => {
        &[Series {
            family: $family,
            labels: &[($label, $value)],
        }]
    };
}

pub(crate) const SAMPLES: Figure = count(
    "samples",
    "On-CPU samples and off-CPU episodes walked in the window (the sum of sonde_samples_total).",
    |i| i.coverage.samples as f64,
)
.unpublished()
.heartbeat("sonde.window.samples")
.logged();
pub(crate) const SAMPLES_CPU: Figure = count("samples_cpu", "On-CPU samples exported.", |i| {
    i.samples_cpu as f64
})
.at(series!("sonde_samples", "profile", "cpu"));
pub(crate) const SAMPLES_OFFCPU: Figure = count(
    "samples_offcpu",
    "Off-CPU episodes whose stacks were walked, exported.",
    |i| i.samples_offcpu as f64,
)
.at(series!("sonde_samples", "profile", "offcpu"));
pub(crate) const LOST_SAMPLES: Figure = count(
    "lost_samples",
    "On-CPU samples and off-CPU episodes lost in the kernel because a counts map was full.",
    |i| (i.window.stats.lost_samples() + i.k(stat::OFFCPU_MAP_FULL)) as f64,
)
.heartbeat("sonde.window.lost_samples")
.logged();
pub(crate) const SYMBOLIZED_FRAME_RATIO: Figure = good_share(
    "symbolized_frame_ratio",
    "Named frames / frames in the last window.",
    |i| (i.coverage.named, i.coverage.frames),
)
.heartbeat("sonde.coverage.symbolized_frame_ratio")
.logged();
pub(crate) const COMPLETE_STACK_RATIO: Figure = good_share(
    "complete_stack_ratio",
    "User stacks that reached a thread entry point / user stacks, in the last window.",
    |i| (i.coverage.complete, i.coverage.user_stacks),
)
.heartbeat("sonde.coverage.complete_stack_ratio")
.logged();
pub(crate) const OVERHEAD_CPU_RATIO: Figure = rate(
    "overhead_cpu_ratio",
    "The agent's CPU time plus its BPF run time over the last window, as a share of the host's CPU capacity (0 on the first window).",
    |i| i.usage.cpu_seconds + i.window.kernel_cost.total().1.as_secs_f64(),
    true,
)
.heartbeat("sonde.overhead.cpu_ratio")
.logged();

/// Every figure userspace computes, in report order.
pub(crate) static WINDOW: &[Figure] = &[
    count("windows", "Windows produced.", |_| 1.0),
    now("window_duration", "Length of the last window.", |i| i.seconds()).unit(Unit::Seconds),
    SAMPLES,
    SAMPLES_CPU,
    SAMPLES_OFFCPU,
    LOST_SAMPLES,
    now("processes_seen", "Processes the agent holds.", |i| i.window.processes_held as f64)
        .at(series!("sonde_processes", "state", "seen"))
        .heartbeat("sonde.window.processes_seen"),
    now("processes_sampled", "Processes with samples in the last window.", |i| i.processes_sampled as f64)
        .at(series!("sonde_processes", "state", "sampled"))
        .heartbeat("sonde.window.processes_sampled")
        .logged(),
    // Targets (relabel rules).
    now("targets_kept", "Targets (processes) the relabel rules keep.", |i| i.window.targets.kept as f64)
        .at(series!("sonde_targets", "state", "kept"))
        .logged(),
    now("targets_dropped", "Targets (processes) the relabel rules drop: filtered in the kernel before any stack is taken.", |i| i.window.targets.dropped as f64)
        .at(series!("sonde_targets", "state", "dropped"))
        .logged(),
    so_far("target_late_samples", "Samples of dropped targets taken before the kernel had the rules' decision (a process's first samples), removed at the drain.", |i| i.window.targets.late_samples as f64)
        .at(series!("sonde_dropped", "reason", "target_late")),
    // Coverage.
    count("frames", "Frames exported (markers excluded).", |i| i.coverage.frames as f64),
    count("frames_named", "Frames exported with a function name.", |i| i.coverage.named as f64),
    SYMBOLIZED_FRAME_RATIO,
    COMPLETE_STACK_RATIO,
    defect_share(
        "truncated_stack_ratio",
        "User stacks that did not reach a thread entry point / user stacks (1 - complete_stack_ratio).",
        |i| (i.coverage.user_stacks - i.coverage.complete, i.coverage.user_stacks),
    )
    .unpublished(),
    labelled(
        "service_symbolized_frame_ratio",
        Kind::Ratio,
        "Named frames / frames in the last window, for the services with the most samples (the rest: other).",
        &["service_name"],
        |i| i.per_service.iter().map(|(s, c)| (vec![s.clone()], c.symbolized_ratio())).collect(),
    ),
    labelled(
        "service_complete_stack_ratio",
        Kind::Ratio,
        "Complete user stacks / user stacks in the last window, per service as above.",
        &["service_name"],
        |i| i.per_service.iter().map(|(s, c)| (vec![s.clone()], c.complete_ratio())).collect(),
    ),
    // Stack walks.
    count("walks", "User-stack walks (the sum of sonde_stack_walks_total).", |i| i.window.stats.walks() as f64)
        .unpublished(),
    good_share("walk_root_ratio", "User-stack walks that reached a thread root / walks of a live stack (not exiting, not inside execve), in the last window.", |i| {
        (i.k(stat::WALK_ROOT), i.window.stats.live_walks())
    })
    .logged(),
    count("walk_cuts", "User-stack walks of a live stack that did not reach a thread root (sonde_stack_walks_total but root, exiting and execing).", |i| {
        (i.window.stats.live_walks() - i.k(stat::WALK_ROOT)) as f64
    })
    .unpublished()
    .logged(),
    good_share(
        "walk_root_ratio_new_processes",
        "Walks of processes not captured yet (walked with the mappings the kernel recorded) that reached a thread root / such walks.",
        |i| (i.k(stat::VMA_WALK_ROOT), i.k(stat::VMA_WALKS)),
    ),
    labelled(
        "walk_root_ratio_by_age",
        Kind::Ratio,
        "User-stack walks that reached a thread root / walks of a live stack, by the age of their process, in the last window.",
        &["age"],
        |i| {
            crate::bpf::drain::AGE_BUCKETS
                .iter()
                .enumerate()
                .map(|(b, age)| {
                    let (walks, root) = i.window.stats.walks_by_age(b);
                    (vec![(*age).to_owned()], crate::ratio::good_share(root, walks))
                })
                .collect()
        },
    ),
    mean("frames_per_stack", "Frames per user-stack walk in the last window.", |i| {
        (i.k(stat::WALK_FRAMES) as f64, i.window.stats.walks() as f64)
    })
    .logged(),
    count("unwind_fallbacks", "Frames (or walks) stepped by frame pointer for lack of a table (the sum of the fallback_* kernel events).", |i| {
        i.window.stats.fallbacks() as f64
    })
    .unpublished()
    .logged(),
    count("stacks_missing", "Stack ids referenced by an aggregate but absent from their map.", |i| {
        i.window.stats.stacks_missing as f64
    })
    .at(series!("sonde_dropped", "reason", "stack_missing"))
    .logged(),
    count("kernel_stacks_full", "Samples (off-CPU: episodes) whose kernel stack filled the stack map's 64 frames, so its outermost frames may have been cut.", |i| {
        i.window.stats.kernel_stacks_full as f64
    })
    .at(series!("sonde_dropped", "reason", "kernel_stack_cut"))
    .logged(),
    // Unwind tables.
    so_far("unwind_tables_built", "Unwind tables built from .eh_frame and loaded.", |i| unwind(i).tables_built as f64)
        .at(series!("sonde_unwind_tables", "event", "built"))
        .logged(),
    so_far("unwind_tables_from_disk", "Unwind tables read from disk and loaded.", |i| unwind(i).tables_from_disk as f64)
        .at(series!("sonde_unwind_tables", "event", "from_disk"))
        .logged(),
    so_far("unwind_tables_not_kept", "Unwind tables built that are not kept on disk (binaries not root's alone, or without a build id).", |i| {
        unwind(i).tables_not_kept as f64
    })
    .at(series!("sonde_unwind_tables", "event", "not_kept"))
    .logged(),
    so_far("unwind_table_failures", "Binaries without a usable unwind table.", |i| unwind(i).build_failures as f64)
        .at(series!("sonde_unwind_tables", "event", "failed")),
    so_far("unwind_table_evictions", "Unwind tables evicted to stay within the budget.", |i| unwind(i).evictions as f64)
        .at(series!("sonde_unwind_tables", "event", "evicted"))
        .logged(),
    so_far("unwind_table_rows", "Rows of the unwind tables built.", |i| unwind(i).rows as f64),
    so_far("unwind_build", "Time spent building and loading unwind tables.", |i| unwind(i).build_seconds)
        .unit(Unit::Seconds)
        .logged(),
    now("unwind_table_memory", "Kernel memory of the unwind tables loaded now.", |i| unwind(i).table_bytes as f64)
        .unit(Unit::Bytes)
        .logged(),
    now("unwind_table_budget", "Kernel memory allowed for unwind tables (--max-unwind-table-mib).", |i| {
        unwind(i).budget_bytes as f64
    })
    .unit(Unit::Bytes),
    now("unwind_table_pages", "Unwind table page entries in the kernel now.", |i| unwind(i).pages as f64),
    now("unwind_page_hash_capacity", "Page entries the kernel's page hash holds before it is replaced by a larger one.", |i| {
        unwind(i).page_capacity as f64
    }),
    now("unwind_processes", "Processes with mapping entries in the kernel now.", |i| unwind(i).processes as f64),
    so_far("unwind_mappings_dropped", "Executable mappings beyond the kernel's per-process limit (left to frame pointers).", |i| {
        unwind(i).mappings_dropped as f64
    }),
    so_far("unwind_processes_dropped", "Processes whose mapping entries could not be written (map full).", |i| {
        unwind(i).processes_dropped as f64
    }),
    so_far("unwind_queue_full", "Unwinder requests dropped: its queue was full.", |i| unwind(i).requests_dropped as f64)
        .at(series!("sonde_dropped", "reason", "unwind_queue_full")),
    // Process capture.
    so_far("processes_captured", "Processes captured.", |i| i.window.capture.captured as f64)
        .at(series!("sonde_process_captures", "result", "captured")),
    so_far("processes_gone", "Processes gone before they could be captured.", |i| i.window.capture.gone as f64)
        .at(series!("sonde_process_captures", "result", "gone")),
    so_far("processes_captured_exited", "Of the processes captured, those that exited while their files were opened (captured from what was read).", |i| {
        i.window.capture.captured_exited as f64
    })
    .at(series!("sonde_process_captures", "result", "captured_exited")),
    so_far("unopenable_files", "Mapped files that could not be opened.", |i| i.window.capture.unopenable_files as f64)
        .at(series!("sonde_process_captures", "result", "unopenable_file")),
    so_far("maps_denied", "Processes whose mappings the kernel refused to show (CAP_SYS_PTRACE).", |i| {
        i.window.capture.maps_denied as f64
    })
    .at(series!("sonde_processes_unreadable", "reason", "maps_denied")),
    so_far("binaries_unopenable", "Captures with a mapped binary that could not be opened.", |i| {
        i.window.capture.binaries_unopenable as f64
    })
    .at(series!("sonde_processes_unreadable", "reason", "binary_unopenable")),
    labelled(
        "input_refusals",
        Kind::Counter,
        "Inputs a profiled process controls that sonde refused to read or build on its behalf, by input (perf_map, debug_file, binary, unwind_table, runtime_code) and reason (symlink, not_regular, owner, permission, fuse, too_large, bad_name, budget); see THREAT_MODEL.md.",
        &["input", "reason"],
        |_| {
            crate::process::untrusted::refusals::snapshot()
                .into_iter()
                .map(|(input, reason, n)| (vec![input.to_owned(), reason.to_owned()], n as f64))
                .collect()
        },
    ),
    // Symbols.
    so_far("symbolize_errors", "Symbolizer calls that failed (their frames stay unnamed).", |i| i.window.symbolize.errors as f64),
    so_far("unmapped_process_gone", "[unmapped] frames of processes that exited before their mappings were read.", |i| {
        i.window.symbolize.unmapped.process_gone as f64
    })
    .at(series!("sonde_unmapped_frames", "reason", "process_gone")),
    so_far("unmapped_outside_mappings", "[unmapped] frames in none of their process's known mappings.", |i| {
        i.window.symbolize.unmapped.outside_mappings as f64
    })
    .at(series!("sonde_unmapped_frames", "reason", "outside_mappings")),
    so_far("unmapped_file_unknown", "[unmapped] frames stored relative to a file no longer known.", |i| {
        i.window.symbolize.unmapped.unknown_file as f64
    })
    .at(series!("sonde_unmapped_frames", "reason", "file_unknown")),
    so_far("debug_files_own", "Binaries symbolized from their own symbols.", |i| i.window.debug.own as f64)
        .at(series!("sonde_debug_files", "source", "own")),
    so_far("debug_files_local", "Binaries symbolized from a debug file on a local disk.", |i| i.window.debug.local as f64)
        .at(series!("sonde_debug_files", "source", "local")),
    so_far("debug_files_minidebuginfo", "Binaries symbolized from their MiniDebugInfo.", |i| i.window.debug.minidebuginfo as f64)
        .at(series!("sonde_debug_files", "source", "minidebuginfo")),
    so_far("debug_files_debuginfod", "Binaries symbolized from a debuginfod download.", |i| i.window.debug.debuginfod as f64)
        .at(series!("sonde_debug_files", "source", "debuginfod")),
    so_far("debug_build_id_mismatches", "Debug files rejected because their build id is another build's.", |i| {
        (i.window.debug.mismatches + i.window.debug.client.mismatches) as f64
    }),
    so_far(
        "debug_dwarf_too_large",
        "Binaries named from their symbol table, without inlined functions or lines: their compressed DWARF would take over 8 MiB of memory decompressed.",
        |i| i.window.debug.dwarf_too_large as f64,
    )
    .logged(),
    so_far("debuginfod_requests", "debuginfod HTTP requests made.", |i| i.window.debug.client.requests as f64)
        .at(series!("sonde_debuginfod_lookups", "result", "request")),
    so_far("debuginfod_fetched", "Debug files fetched from debuginfod.", |i| i.window.debug.client.fetched as f64)
        .at(series!("sonde_debuginfod_lookups", "result", "fetched"))
        .logged(),
    so_far("debuginfod_cache_hits", "debuginfod lookups answered by the disk cache.", |i| i.window.debug.client.cache_hits as f64)
        .at(series!("sonde_debuginfod_lookups", "result", "cache_hit")),
    so_far("debuginfod_misses", "debuginfod lookups no server could answer.", |i| i.window.debug.client.misses as f64)
        .at(series!("sonde_debuginfod_lookups", "result", "miss")),
    so_far("debuginfod_failures", "debuginfod lookups that failed.", |i| i.window.debug.client.failures as f64)
        .at(series!("sonde_debuginfod_lookups", "result", "failure"))
        .logged(),
    so_far("debuginfod_downloaded", "Bytes downloaded from debuginfod servers.", |i| i.window.debug.client.bytes as f64)
        .unit(Unit::Bytes),
    so_far("debuginfod_queue_full", "debuginfod lookups dropped: the fetch queue was full.", |i| {
        i.window.debug.client.queue_full as f64
    })
    .at(series!("sonde_dropped", "reason", "debuginfod_queue_full")),
    so_far("perf_map_reads", "JIT perf maps read (or read further after growing).", |i| i.window.perf_maps.reads as f64),
    so_far("perf_map_entries", "Entries read from JIT perf maps (/tmp/perf-PID.map).", |i| i.window.perf_maps.entries as f64),
    so_far("perf_map_bad_lines", "Perf map lines that are not START SIZE name.", |i| i.window.perf_maps.bad_lines as f64),
    so_far("perf_map_ignored", "Perf map bytes ignored beyond the per-map bound.", |i| i.window.perf_maps.truncated_bytes as f64)
        .unit(Unit::Bytes),
    // Sample labels the runtimes publish (goroutine labels).
    count("go_labels_missing", "Samples whose goroutine label set was gone when read (kept without labels).", |i| {
        i.window.stats.labels_missing as f64
    }),
    // Off-CPU sampling.
    now("offcpu_pending", "Threads remembered as off-CPU at the end of the window.", |i| i.window.stats.off_cpu_pending as f64),
    now("offcpu_budget", "Off-CPU stack walks allowed per CPU per second (0: every episode).", |i| {
        i.window.offcpu.map_or(0.0, |o| f64::from(o.budget))
    }),
    now("offcpu_walks_per_cpu_second", "Off-CPU episodes tracked per CPU per second in the last window.", |i| {
        i.k(stat::OFFCPU_SWITCH_OUT) as f64 / i.seconds() / i.cpus as f64
    }),
    now("offcpu_one_in_min", "Smallest inverse probability an off-CPU episode was tracked with (1: all).", |i| {
        i.window.offcpu.map_or(0.0, |o| f64::from(o.one_in_min))
    }),
    now("offcpu_one_in_max", "Largest inverse probability an off-CPU episode was tracked with.", |i| {
        i.window.offcpu.map_or(0.0, |o| f64::from(o.one_in_max))
    })
    .logged(),
    // Overhead.
    so_far("agent_cpu", "CPU time of the agent process (user + system).", |i| i.usage.cpu_seconds).unit(Unit::Seconds),
    rate("agent_cpu_usage", "The agent's CPU seconds per second over the last window (0 on the first).", |i| i.usage.cpu_seconds, false)
        .logged(),
    rate(
        "bpf_cpu_usage",
        "The BPF programs' run seconds per second over the last window (0 on the first).",
        |i| i.window.kernel_cost.total().1.as_secs_f64(),
        false,
    ),
    OVERHEAD_CPU_RATIO,
    now("agent_resident_memory", "Resident memory of the agent process.", |i| i.usage.rss_bytes as f64)
        .unit(Unit::Bytes)
        .logged(),
    now("agent_peak_resident_memory", "Peak resident memory of the agent process.", |i| i.usage.peak_rss_bytes as f64)
        .unit(Unit::Bytes),
    now("agent_anonymous_memory", "Anonymous resident memory of the agent process.", |i| i.usage.anon_bytes as f64)
        .unit(Unit::Bytes),
    now("agent_file_memory", "File-backed resident memory of the agent process.", |i| i.usage.file_bytes as f64)
        .unit(Unit::Bytes),
    now("bpf_map_memory", "Kernel memory of the agent's BPF maps.", |i| i.window.kernel_cost.map_bytes as f64)
        .unit(Unit::Bytes),
    labelled(
        "bpf_map_size",
        Kind::Gauge,
        "Kernel memory of each of the agent's BPF maps, by name (the unwind rows' chunks summed).",
        &["map"],
        |i| i.window.kernel_cost.maps.iter().map(|(name, bytes)| (vec![name.clone()], *bytes as f64)).collect(),
    )
    .unit(Unit::Bytes),
    now("agent_footprint", "Memory the agent costs its host: its resident memory plus its BPF maps' kernel memory.", |i| {
        (i.usage.rss_bytes + i.window.kernel_cost.map_bytes) as f64
    })
    .unit(Unit::Bytes)
    .logged()
    .heartbeat("sonde.overhead.footprint_bytes"),
    labelled(
        "bpf_program_runs",
        Kind::Counter,
        "Runs of each of the agent's BPF programs (run-time statistics on for the agent's lifetime).",
        &["program"],
        |i| i.window.kernel_cost.programs.iter().map(|p| (vec![p.name.clone()], p.runs as f64)).collect(),
    ),
    labelled(
        "bpf_program_run",
        Kind::Counter,
        "Run time of each of the agent's BPF programs.",
        &["program"],
        |i| i.window.kernel_cost.programs.iter().map(|p| (vec![p.name.clone()], p.run_time.as_secs_f64())).collect(),
    )
    .unit(Unit::Seconds),
    labelled(
        "bpf_program_verified_instructions",
        Kind::Gauge,
        "Instructions the kernel's verifier processed to load each of the agent's BPF programs: the start's kernel cost, paid once per program (runtimes that are off are pruned and cost none). Absent where the kernel does not say (before Linux 5.16).",
        &["program"],
        |i| i.window.kernel_cost.programs.iter().filter(|p| p.verified_instructions > 0).map(|p| (vec![p.name.clone()], f64::from(p.verified_instructions))).collect(),
    ),
    mean("bpf_run_nanoseconds", "Mean run time of one BPF program run, nanoseconds, over the agent's lifetime.", |i| {
        let (runs, time) = i.window.kernel_cost.total();
        (time.as_nanos() as f64, runs as f64)
    }),
    labelled(
        "kernel_feature",
        Kind::Gauge,
        "Whether the running kernel offers each feature sonde's programs use (1) or not (0), by feature, with the kernel's release: ringbuf is required; without bpf_loop, bpf_task_pt_regs, bpf_find_vma or alloc_in_perf_event the legacy programs load (see kernel_programs); without bpf_snprintf kernel frames are named from /proc/kallsyms, without vmlinux_btf CPython 3.9/3.10 threads and processes younger than their first capture are not recognised.",
        &["feature", "kernel"],
        |i| i.window.kernel_features.as_deref().map(crate::platform::kernel::KernelFeatures::series).unwrap_or_default(),
    ),
    labelled(
        "kernel_programs",
        Kind::Gauge,
        "Which build of the kernel programs the running kernel loaded (1): full (Linux 6.1+, or a kernel with every feature backported) or legacy (Linux 5.10 to 6.0: bounded loops of global steps, preallocated maps at a quarter of the sizes, no mappings recorded by the kernel).",
        &["programs", "kernel"],
        |i| i.window.kernel_features.as_deref().map(|f| vec![(vec![f.programs().name().to_owned(), f.release.name.clone()], 1.0)]).unwrap_or_default(),
    ),
    labelled(
        "oncpu_sample_nanoseconds",
        Kind::Gauge,
        "Run time of the on-CPU program for one recorded sample, nanoseconds, over the agent's lifetime (p50, p90), by the walker that did the most: frame_pointers, tables, python, java, v8, or kernel (no user stack). Timed by the program itself, 250 ns buckets; needs no bpf_stats.",
        &["path", "quantile"],
        |i| i.window.kernel_cost.samples.series(),
    ),
];

fn unwind(i: &Input) -> crate::unwind::UnwindStats {
    i.window.unwind.unwrap_or_default()
}
