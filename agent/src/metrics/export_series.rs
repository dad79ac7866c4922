//! The export path's families: every counter of every sink's [`crate::export::ExportMetrics`], and the
//! queue, spool and lag gauges, one series per sink (label `sink`: `otlp`, `pyroscope`, `parca`,
//! `local`). Summed over `sink`, a counter says what all sinks did; windows are counted once per sink.

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::collector::{CounterSeries, Labels, counter, family, gauge};
use crate::{clock::unix_nanos_now, export::Destinations, export::ExportMetrics};

/// Writes the export families of `destinations`.
pub(super) fn encode(e: &mut DescriptorEncoder, destinations: &Destinations) -> std::fmt::Result {
    let mut by_name: Vec<(&'static str, CounterSeries)> = Vec::new();
    for d in destinations.iter() {
        for (name, reason, v) in d.exporter.metrics().snapshot() {
            let mut labels: Labels = vec![("sink", d.name.to_owned())];
            labels.extend(reason.map(|r| ("reason", r.to_owned())));
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, series)) => series.push((labels, counter(v))),
                None => by_name.push((name, vec![(labels, counter(v))])),
            }
        }
    }
    for (name, series) in by_name {
        family(e, name, help(name), None, series)?;
    }
    let per_sink = |value: &dyn Fn(&crate::export::Destination) -> f64| {
        destinations
            .iter()
            .map(|d| (vec![("sink", d.name.to_owned())], gauge(value(d))))
            .collect::<Vec<_>>()
    };
    let get = |d: &crate::export::Destination,
               f: fn(&ExportMetrics) -> &std::sync::atomic::AtomicU64| {
        ExportMetrics::get(f(d.exporter.metrics())) as f64
    };
    family(
        e,
        "sonde_export_queued_batches",
        "Windows waiting in the export queue.",
        None,
        per_sink(&|d| d.exporter.queued() as f64),
    )?;
    family(
        e,
        "sonde_export_spool_batches",
        "Windows waiting in the disk spool (remote sinks).",
        None,
        per_sink(&|d| get(d, |m| &m.spool_batches)),
    )?;
    family(
        e,
        "sonde_export_spool",
        "Disk used by the spool's files, quarantined ones included.",
        Some(Unit::Bytes),
        per_sink(&|d| get(d, |m| &m.spool_bytes)),
    )?;
    family(
        e,
        "sonde_export_ingest_lag",
        "From the end of the last delivered window to the backend's acknowledgement.",
        Some(Unit::Seconds),
        per_sink(&|d| get(d, |m| &m.last_ingest_lag_ms) / 1e3),
    )?;
    family(
        e,
        "sonde_export_oldest_undelivered_window_age",
        "Age of the oldest window produced but not yet delivered (0: none).",
        Some(Unit::Seconds),
        per_sink(&|d| {
            d.exporter
                .oldest_undelivered_end()
                .map_or(0.0, |end| (unix_nanos_now() - end).max(0) as f64 / 1e9)
        }),
    )
}

fn help(name: &str) -> &'static str {
    match name {
        "sonde_export_batches_sent" => "Windows fully delivered.",
        "sonde_export_requests_sent" => "Requests (or files) delivered.",
        "sonde_export_bytes_sent" => "Bytes put on the wire (compressed) or on disk.",
        "sonde_export_retries" => "Re-attempts after a retryable failure.",
        "sonde_export_dropped_batches" => "Windows lost by the export path, by reason.",
        "sonde_export_spooled_batches" => "Windows written to the disk spool.",
        "sonde_export_replayed_batches" => "Spooled windows delivered (also in batches_sent).",
        "sonde_export_spool_quarantined_files" => {
            "Spool files that failed their checksum, set aside as *.corrupt."
        }
        "sonde_export_partial_success_rejected_profiles" => {
            "Profiles the backend rejected in a partial success."
        }
        "sonde_local_repairs" => "Damage of an unclean stop repaired at start, by kind.",
        "sonde_local_retention_deleted_profiles" => {
            "Profiles the retention tiers deleted from the local data directory, by reason."
        }
        _ => "Export counter.",
    }
}
