//! What the daemon does with each window the sampling thread hands over: split it per process, tag,
//! compute its figures (`crate::figures`), queue the batch with the agent's heartbeat, and log the
//! figures the window log shows.

use super::json_log::JsonLog;
use crate::{
    export::{self, Batch, Destinations},
    figures,
    metadata::{MetadataResolver, Tags},
    metrics::Metrics,
    profile::{Profile, ProfileKind, group},
    sampler::Window,
    symbolize::offenders,
    targets::Targets,
};

/// A target's on-CPU profile sampled at `hz`: its period is what one of its samples stands for,
/// and its CPU time counts each sample as that period (the kernel kept `hz` of the base rate).
fn at_frequency(profile: &mut Profile, hz: u64) {
    if profile.kind != ProfileKind::Cpu {
        return;
    }
    let period = 1_000_000_000 / hz.max(1) as i64;
    if period == profile.period {
        return;
    }
    profile.period = period;
    for sample in &mut profile.samples {
        if let [count, nanos, ..] = sample.values.as_mut_slice() {
            *nanos = *count * period;
        }
    }
}

/// The process's tags with the labels the relabel rules gave its target (which win: the rules are
/// the operator's word).
fn with_target_labels(
    tags: std::sync::Arc<Tags>,
    labels: &crate::metadata::relabel::Labels,
) -> std::sync::Arc<Tags> {
    if labels.is_empty() {
        return tags;
    }
    let mut tags = (*tags).clone();
    for (k, v) in labels {
        tags.insert(k.clone(), v.clone());
    }
    std::sync::Arc::new(tags)
}

/// Tags the window's per-process profiles, computes the window's figures, and queues the batch with
/// the agent's heartbeat; logs the figures (one line, and one JSON line into `json`).
pub(super) fn ship(
    window: &Window,
    resolver: &MetadataResolver,
    targets: &Targets,
    destinations: &Destinations,
    metrics: &Metrics,
    report_wire_bytes: bool,
    json: Option<&JsonLog>,
) {
    let mut profiles = Vec::new();
    for profile in [&window.on_cpu, &window.off_cpu].into_iter().flatten() {
        for (pid, mut p) in group::by_process(profile) {
            let target = targets.get_or_decide(pid);
            if let Some(hz) = target.hz {
                at_frequency(&mut p, hz);
            }
            profiles.push((
                with_target_labels(resolver.tags_for(pid), &target.labels),
                p,
            ));
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
    let figures = metrics.record_window(window, &batch);
    batch.heartbeat = figures::heartbeat(resolver.host_name(), &figures);
    if report_wire_bytes {
        let sizes = export::size::wire_sizes(&batch);
        tracing::info!(
            otlp_gzip_bytes = sizes.otlp_gzip_bytes,
            pprof_gzip_bytes = sizes.pprof_gzip_bytes,
            pprof_files = sizes.pprof_files,
            wire_samples = sizes.samples,
            otlp_gzip_bytes_threads_merged = sizes.otlp_gzip_bytes_threads_merged,
            "wire"
        );
        if let Some(log) = json {
            log.write(serde_json::json!({
                "event": "wire",
                "otlp_gzip_bytes": sizes.otlp_gzip_bytes,
                "pprof_gzip_bytes": sizes.pprof_gzip_bytes,
                "pprof_files": sizes.pprof_files,
                "samples": sizes.samples,
                "otlp_gzip_bytes_threads_merged": sizes.otlp_gzip_bytes_threads_merged,
            }));
        }
    }
    let accepted = destinations.submit(batch);
    let unsymbolized = offenders::describe(&window.unsymbolized);
    let queued = destinations.queued();
    tracing::info!(
        "window {} unsymbolized_top={unsymbolized:?} queued={queued} dropped_oldest={}",
        figures::log_line(&figures),
        !accepted
    );
    if let Some(log) = json {
        log.write(serde_json::json!({
            "event": "window",
            "unsymbolized_top": offenders::json(&window.unsymbolized),
            "queued": queued,
            "dropped_oldest": !accepted,
            "figures": figures.json(),
        }));
    }
}
