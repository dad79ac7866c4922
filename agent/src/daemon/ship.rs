//! What the daemon does with each window the sampling thread hands over: split it per process, tag,
//! fold it into the metrics, queue the batch with the agent's heartbeat, and log one line of the
//! agent's own coverage and cost.

use crate::{
    export::{self, Batch, Destinations},
    metadata::{MetadataResolver, Tags, keys},
    metrics::{LastWindow, Metrics},
    profile::group,
    sampler::Window,
    symbolize::offenders,
};

/// Tags the window's per-process profiles, folds the window into the metrics, and queues the batch
/// with the agent's heartbeat; logs the agent's own coverage and cost.
pub(super) fn ship(
    window: &Window,
    resolver: &MetadataResolver,
    destinations: &Destinations,
    metrics: &Metrics,
    report_wire_bytes: bool,
) {
    let mut profiles = Vec::new();
    for profile in [&window.on_cpu, &window.off_cpu].into_iter().flatten() {
        for (pid, p) in group::by_process(profile) {
            profiles.push((resolver.tags_for(pid), p));
        }
    }
    for pid in &window.exited {
        resolver.forget(*pid);
    }
    let (start, duration) = window
        .on_cpu
        .as_ref()
        .or(window.off_cpu.as_ref())
        .map(|p| (p.time_nanos, p.duration_nanos))
        .unwrap_or((crate::clock::unix_nanos_now(), 0));
    let mut batch = Batch {
        start_unix_nanos: start,
        end_unix_nanos: start + duration,
        profiles,
        heartbeat: Tags::new(),
    };
    let last = metrics.record_window(window, &batch);
    batch.heartbeat = heartbeat(resolver.host_name(), window, &last);
    let samples: i64 = window
        .on_cpu
        .iter()
        .flat_map(|p| &p.samples)
        .map(|s| s.values[0])
        .sum();
    let processes = batch.profiles.len();
    if report_wire_bytes {
        let sizes = export::size::wire_sizes(&batch);
        tracing::info!(
            otlp_gzip_bytes = sizes.otlp_gzip_bytes,
            pprof_gzip_bytes = sizes.pprof_gzip_bytes,
            pprof_files = sizes.pprof_files,
            wire_samples = sizes.samples,
            "wire"
        );
    }
    let accepted = destinations.submit(batch);
    let walk = &window.stats;
    let tables = window.unwind.unwrap_or_default();
    let note = |key: &str| {
        window
            .off_cpu
            .iter()
            .flat_map(|p| &p.notes)
            .find(|(k, _)| k == key)
            .map_or_else(String::new, |(_, v)| v.clone())
    };
    tracing::info!(
        samples,
        processes,
        lost_samples = last.lost_samples,
        stacks_missing = window.stats.stacks_missing,
        walk_root_percent = format!("{:.1}", 100.0 * walk.walk_root_ratio()),
        complete_stack_percent = format!("{:.1}", 100.0 * last.coverage.complete_ratio()),
        symbolized_percent = format!("{:.1}", 100.0 * last.coverage.symbolized_ratio()),
        frames_per_stack = format!("{:.1}", walk.frames_per_stack()),
        walk_cuts = walk.walks() - walk.kernel[sonde_abi::stat::WALK_ROOT as usize],
        unwind_fallbacks = walk.fallbacks(),
        unwind_table_mib = format!("{:.1}", tables.table_bytes as f64 / 1048576.0),
        unwind_evictions = tables.evictions,
        unwind_tables_built = tables.tables_built,
        unwind_tables_from_disk = tables.tables_from_disk,
        unwind_build_ms = format!("{:.0}", tables.build_seconds * 1000.0),
        offcpu_switches = note("sonde.offcpu.switches"),
        offcpu_tracked = note("sonde.offcpu.tracked"),
        offcpu_one_in_max = note("sonde.offcpu.one_in_max"),
        unsymbolized_top = offenders::describe(&window.unsymbolized),
        debuginfod_fetched = window.debug.client.fetched,
        debuginfod_failures = window.debug.client.failures,
        cpu_percent = format!("{:.2}", 100.0 * last.agent_cpu_per_s),
        overhead_percent = format!("{:.3}", 100.0 * last.overhead_ratio),
        rss_mib = format!("{:.1}", last.rss_bytes as f64 / 1048576.0),
        queued = destinations.queued(),
        dropped_oldest = !accepted,
        "window"
    );
}

/// The agent's identity and this window's coverage, as OTLP resource attributes: a backend counts
/// instances reporting and their coverage from them, idle windows included.
fn heartbeat(host: &str, window: &Window, last: &LastWindow) -> Tags {
    let mut t = Tags::new();
    if !host.is_empty() {
        t.insert(keys::HOST_NAME, host);
    }
    t.insert("sonde.agent.version", env!("CARGO_PKG_VERSION"));
    t.insert("sonde.window.samples", last.coverage.samples.to_string());
    t.insert("sonde.window.lost_samples", last.lost_samples.to_string());
    t.insert(
        "sonde.window.processes_seen",
        window.processes_held.to_string(),
    );
    t.insert(
        "sonde.window.processes_sampled",
        last.processes_sampled.to_string(),
    );
    t.insert(
        "sonde.coverage.complete_stack_ratio",
        format!("{:.4}", last.coverage.complete_ratio()),
    );
    t.insert(
        "sonde.coverage.symbolized_frame_ratio",
        format!("{:.4}", last.coverage.symbolized_ratio()),
    );
    t.insert(
        "sonde.overhead.cpu_ratio",
        format!("{:.6}", last.overhead_ratio),
    );
    t
}
