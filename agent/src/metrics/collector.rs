//! Every metric the agent publishes, encoded at scrape time from the window state, the export
//! counters and the agent's own usage. The README's "Self-metrics" table lists the same names; a test
//! checks that each is scraped with its help and type.

use std::sync::{Arc, Mutex};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{TypedMetric, counter::ConstCounter, gauge::ConstGauge},
    registry::Unit,
};

use super::{Health, state::State, usage};
use crate::clock::unix_nanos_now;
use crate::{
    bpf::drain::{KERNEL_COUNTERS, WALK_OUTCOMES},
    export::Destinations,
};

pub(super) type Labels = Vec<(&'static str, String)>;
pub(super) type CounterSeries = Vec<(Labels, ConstCounter<u64>)>;

/// Reads everything at scrape time.
#[derive(Debug)]
pub struct AgentCollector {
    pub state: Arc<Mutex<State>>,
    pub destinations: Destinations,
    pub health: Arc<Health>,
    pub local_dir: Option<std::path::PathBuf>,
}

/// Age of the oldest window in the local data directory: its index is appended in window order, so
/// the first line is the oldest. 0 when there is none.
fn local_retention_seconds(dir: &std::path::Path) -> f64 {
    use std::io::{BufRead as _, Read as _};
    let Ok(file) = std::fs::File::open(dir.join(crate::datadir::INDEX_FILE)) else {
        return 0.0;
    };
    let mut first = String::new();
    // One line is a few hundred bytes; a torn or foreign file reads as no retention.
    if std::io::BufReader::new(file.take(64 * 1024))
        .read_line(&mut first)
        .is_err()
    {
        return 0.0;
    }
    serde_json::from_str::<crate::datadir::IndexEntry>(&first).map_or(0.0, |e| {
        (unix_nanos_now() - e.start_unix_nanos).max(0) as f64 / 1e9
    })
}

/// Writes one family: its descriptor, then each series.
pub(super) fn family<M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    series: Vec<(Labels, M)>,
) -> std::fmt::Result {
    let mut fam = enc.encode_descriptor(name, help, unit.as_ref(), M::TYPE)?;
    for (labels, metric) in series {
        metric.encode(fam.encode_family(&labels)?)?;
    }
    Ok(())
}

fn one<M: EncodeMetric + TypedMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    metric: M,
) -> std::fmt::Result {
    family(enc, name, help, unit, vec![(Vec::new(), metric)])
}

pub(super) fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

pub(super) fn gauge(v: f64) -> ConstGauge<f64> {
    ConstGauge::new(v)
}

fn label(key: &'static str, value: impl Into<String>) -> Labels {
    vec![(key, value.into())]
}

impl Collector for AgentCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let e = &mut enc;
        family(
            e,
            "sonde_build_info",
            "The agent's version (always 1).",
            None,
            vec![(label("version", env!("CARGO_PKG_VERSION")), gauge(1.0))],
        )?;
        one(
            e,
            "sonde_windows",
            "Windows produced.",
            None,
            counter(s.windows),
        )?;

        // Overhead.
        let (cpu_seconds, rss) = usage::agent_usage();
        one(
            e,
            "sonde_agent_cpu",
            "CPU time of the agent process (user + system).",
            Some(Unit::Seconds),
            ConstCounter::new(cpu_seconds),
        )?;
        one(
            e,
            "sonde_agent_resident_memory",
            "Resident memory of the agent process.",
            Some(Unit::Bytes),
            gauge(rss as f64),
        )?;
        let programs = &s.kernel_cost.programs;
        family(
            e,
            "sonde_bpf_program_runs",
            "Runs of each of the agent's BPF programs (run-time statistics on for the agent's lifetime).",
            None,
            programs
                .iter()
                .map(|(name, runs, _)| (label("program", name.clone()), counter(*runs)))
                .collect(),
        )?;
        family(
            e,
            "sonde_bpf_program_run",
            "Run time of each of the agent's BPF programs.",
            Some(Unit::Seconds),
            programs
                .iter()
                .map(|(name, _, t)| {
                    (
                        label("program", name.clone()),
                        ConstCounter::new(t.as_secs_f64()),
                    )
                })
                .collect(),
        )?;
        one(
            e,
            "sonde_bpf_map_memory",
            "Kernel memory of the agent's BPF maps.",
            Some(Unit::Bytes),
            gauge(s.kernel_cost.map_bytes as f64),
        )?;
        one(
            e,
            "sonde_overhead_cpu_ratio",
            "The agent's CPU time plus its BPF run time over the last window, as a share of the host's CPU capacity.",
            None,
            gauge(s.last.overhead_ratio),
        )?;

        // Coverage.
        family(
            e,
            "sonde_samples",
            "Samples exported: on-CPU samples, and off-CPU episodes whose stacks were walked.",
            None,
            vec![
                (label("profile", "cpu"), counter(s.samples_cpu)),
                (label("profile", "offcpu"), counter(s.samples_offcpu)),
            ],
        )?;
        family(
            e,
            "sonde_kernel_events",
            "The kernel programs' counters, summed over CPUs.",
            None,
            KERNEL_COUNTERS
                .iter()
                .map(|(name, i)| (label("event", *name), counter(s.kernel[*i as usize])))
                .collect(),
        )?;
        family(
            e,
            "sonde_stack_walks",
            "User-stack walks by how they ended (root: complete).",
            None,
            WALK_OUTCOMES
                .iter()
                .map(|(name, i)| (label("outcome", *name), counter(s.kernel[*i as usize])))
                .collect(),
        )?;
        family(
            e,
            "sonde_stack_walks_by_process_age",
            "User-stack walks by the age of their process since fork, all of them and those reaching a thread root (complete): the coverage of short-lived processes.",
            None,
            crate::bpf::drain::AGE_BUCKETS
                .iter()
                .enumerate()
                .flat_map(|(bucket, age)| {
                    let at = |first: u32| s.kernel[first as usize + bucket];
                    let series = |outcome: &str, n| {
                        let labels = vec![("age", age.to_string()), ("outcome", outcome.into())];
                        (labels, counter(n))
                    };
                    [
                        series("all", at(sonde_abi::stat::AGE_WALKS)),
                        series("root", at(sonde_abi::stat::AGE_WALK_ROOT)),
                    ]
                })
                .collect(),
        )?;
        let k = |i: u32| s.kernel[i as usize];
        use sonde_abi::stat;
        let unwind = s.unwind.unwrap_or_default();
        family(
            e,
            "sonde_dropped",
            "Samples, stacks and events lost, by reason.",
            None,
            [
                ("oncpu_map_full", k(stat::ONCPU_MAP_FULL)),
                ("offcpu_map_full", k(stat::OFFCPU_MAP_FULL)),
                ("offcpu_start_full", k(stat::OFFCPU_START_FULL)),
                ("user_stack_collision", k(stat::USER_STACK_COLLISION)),
                ("kernel_stack_collision", k(stat::KERNEL_STACK_COLLISION)),
                ("user_stack_error", k(stat::USER_STACK_ERROR)),
                ("kernel_stack_error", k(stat::KERNEL_STACK_ERROR)),
                ("stack_missing", s.stacks_missing),
                ("process_events_lost", k(stat::PROC_EVENTS_LOST)),
                ("program_error", k(stat::PROGRAM_ERRORS)),
                ("unwind_queue_full", unwind.requests_dropped),
                ("debuginfod_queue_full", s.debug.client.queue_full),
            ]
            .into_iter()
            .map(|(reason, v)| (label("reason", reason), counter(v)))
            .collect(),
        )?;
        one(
            e,
            "sonde_frames",
            "Frames exported (markers excluded).",
            None,
            counter(s.frames),
        )?;
        one(
            e,
            "sonde_frames_named",
            "Frames exported with a function name.",
            None,
            counter(s.frames_named),
        )?;
        let last = &s.last;
        one(
            e,
            "sonde_symbolized_frame_ratio",
            "Named frames / frames in the last window.",
            None,
            gauge(last.coverage.symbolized_ratio()),
        )?;
        one(
            e,
            "sonde_complete_stack_ratio",
            "User stacks that reached a thread entry point / user stacks, in the last window.",
            None,
            gauge(last.coverage.complete_ratio()),
        )?;
        family(
            e,
            "sonde_service_symbolized_frame_ratio",
            "Named frames / frames in the last window, for the services with the most samples (the rest: other).",
            None,
            last.per_service
                .iter()
                .map(|(svc, c)| {
                    (
                        label("service_name", svc.clone()),
                        gauge(c.symbolized_ratio()),
                    )
                })
                .collect(),
        )?;
        family(
            e,
            "sonde_service_complete_stack_ratio",
            "Complete user stacks / user stacks in the last window, per service as above.",
            None,
            last.per_service
                .iter()
                .map(|(svc, c)| {
                    (
                        label("service_name", svc.clone()),
                        gauge(c.complete_ratio()),
                    )
                })
                .collect(),
        )?;
        family(
            e,
            "sonde_processes",
            "Processes the agent holds (seen), and those with samples in the last window.",
            None,
            vec![
                (label("state", "seen"), gauge(s.processes_held as f64)),
                (
                    label("state", "sampled"),
                    gauge(last.processes_sampled as f64),
                ),
            ],
        )?;

        // Symbols, capture and unwinding.
        one(
            e,
            "sonde_symbolize_errors",
            "Symbolizer calls that failed (their frames stay unnamed).",
            None,
            counter(s.symbolize.errors),
        )?;
        family(
            e,
            "sonde_process_captures",
            "Process captures by result; files mapped but not openable are counted as unopenable_file.",
            None,
            vec![
                (label("result", "captured"), counter(s.capture.captured)),
                (label("result", "gone"), counter(s.capture.gone)),
                (
                    label("result", "unopenable_file"),
                    counter(s.capture.unopenable_files),
                ),
            ],
        )?;
        family(
            e,
            "sonde_processes_unreadable",
            "Captures of processes whose code sonde may not read, so their frames stay unnamed: maps_denied (/proc/PID/maps refused: CAP_SYS_PTRACE), binary_unopenable (a mapped binary could not be opened: deleted or replaced without CAP_CHECKPOINT_RESTORE, or unreadable).",
            None,
            vec![
                (
                    label("reason", "maps_denied"),
                    counter(s.capture.maps_denied),
                ),
                (
                    label("reason", "binary_unopenable"),
                    counter(s.capture.binaries_unopenable),
                ),
            ],
        )?;
        family(
            e,
            "sonde_input_refusals",
            "Inputs a profiled process controls that sonde refused to read or build on its behalf, by input (perf_map, debug_file, binary, unwind_table, python_code) and reason (symlink, not_regular, owner, permission, fuse, too_large, bad_name, budget); see THREAT_MODEL.md.",
            None,
            crate::process::untrusted::refusals::snapshot()
                .into_iter()
                .map(|(input, reason, n)| {
                    (
                        vec![("input", input.to_owned()), ("reason", reason.to_owned())],
                        counter(n),
                    )
                })
                .collect(),
        )?;
        family(
            e,
            "sonde_python_processes",
            "Processes found running CPython, by whether sonde walks their Python frames (supported) or shows native frames only (unsupported: a version outside 3.9 to 3.13).",
            None,
            vec![
                (
                    label("support", "supported"),
                    counter(s.capture.python_processes),
                ),
                (
                    label("support", "unsupported"),
                    counter(s.capture.python_unsupported),
                ),
            ],
        )?;
        let unmapped = s.symbolize.unmapped;
        family(
            e,
            "sonde_unmapped_frames",
            "Frames in no known file ([unmapped], weighted by samples), by reason: process_gone (exited before its mappings were read, walked by frame pointers), outside_mappings (in none of its known mappings), file_unknown (stored relative to a file no longer known).",
            None,
            vec![
                (
                    label("reason", "process_gone"),
                    counter(unmapped.process_gone),
                ),
                (
                    label("reason", "outside_mappings"),
                    counter(unmapped.outside_mappings),
                ),
                (
                    label("reason", "file_unknown"),
                    counter(unmapped.unknown_file),
                ),
            ],
        )?;
        let go = s.symbolize.go;
        family(
            e,
            "sonde_go_binaries",
            "Go binaries whose frames are named from their own .gopclntab, by outcome: read (with the inline tree), no_inline_tree (physical functions only) or failed (unknown layout or malformed; ELF symbols only).",
            None,
            vec![
                (
                    label("outcome", "read"),
                    counter(go.binaries - go.without_inline_tree),
                ),
                (
                    label("outcome", "no_inline_tree"),
                    counter(go.without_inline_tree),
                ),
                (label("outcome", "failed"), counter(go.failures)),
            ],
        )?;
        let d = &s.debug;
        family(
            e,
            "sonde_debug_files",
            "Binaries symbolized, by where their symbols came from.",
            None,
            [
                ("own", d.own),
                ("local", d.local),
                ("minidebuginfo", d.minidebuginfo),
                ("debuginfod", d.debuginfod),
            ]
            .into_iter()
            .map(|(source, v)| (label("source", source), counter(v)))
            .collect(),
        )?;
        one(
            e,
            "sonde_debug_build_id_mismatches",
            "Debug files rejected because their build id is another build's.",
            None,
            counter(d.mismatches + d.client.mismatches),
        )?;
        family(
            e,
            "sonde_debuginfod_lookups",
            "debuginfod lookups by result (request: an HTTP request made).",
            None,
            [
                ("request", d.client.requests),
                ("fetched", d.client.fetched),
                ("cache_hit", d.client.cache_hits),
                ("miss", d.client.misses),
                ("failure", d.client.failures),
            ]
            .into_iter()
            .map(|(result, v)| (label("result", result), counter(v)))
            .collect(),
        )?;
        one(
            e,
            "sonde_debuginfod_downloaded",
            "Bytes downloaded from debuginfod servers.",
            Some(Unit::Bytes),
            counter(d.client.bytes),
        )?;
        one(
            e,
            "sonde_perf_map_entries",
            "Entries read from JIT perf maps (/tmp/perf-PID.map).",
            None,
            counter(s.perf_maps.entries),
        )?;
        family(
            e,
            "sonde_unwind_tables",
            "Unwind tables by event: built, loaded from disk, failed (no usable table), evicted (over \
             the budget).",
            None,
            vec![
                (label("event", "built"), counter(unwind.tables_built)),
                (
                    label("event", "from_disk"),
                    counter(unwind.tables_from_disk),
                ),
                (label("event", "failed"), counter(unwind.build_failures)),
                (label("event", "evicted"), counter(unwind.evictions)),
            ],
        )?;
        one(
            e,
            "sonde_unwind_table_memory",
            "Kernel memory of the unwind tables loaded now.",
            Some(Unit::Bytes),
            gauge(unwind.table_bytes as f64),
        )?;
        drop(s);

        super::export_series::encode(e, &self.destinations)?;
        one(
            e,
            "sonde_local_retention",
            "Age of the oldest window kept in the local data directory (0: none).",
            Some(Unit::Seconds),
            gauge(
                self.local_dir
                    .as_deref()
                    .map_or(0.0, local_retention_seconds),
            ),
        )?;
        one(
            e,
            "sonde_live",
            "1 while the sampling thread makes windows on time (/healthz).",
            None,
            gauge(f64::from(u8::from(self.health.live()))),
        )?;
        one(
            e,
            "sonde_pipeline_stalls",
            "Episodes of the sampling thread making no window for two intervals (the watchdog exits non-zero when one outlasts its limit).",
            None,
            counter(self.health.stalls()),
        )?;
        Ok(())
    }
}
