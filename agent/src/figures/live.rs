//! The families `/metrics` reads at scrape time rather than per window: the agent's identity and
//! health, and every sink's export counters and gauges (atomics the export tasks update as they go,
//! one series per sink). Declared here with the window figures' fields, so `/metrics`, `sonde status`
//! and the exit line name them from one place.

use super::{Kind, Unit};

/// One scrape-time family.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Family {
    /// The family name without `_total` or unit.
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub help: &'static str,
    /// Read by the README check; the collector writes each family's labels itself.
    #[cfg_attr(not(test), expect(dead_code))]
    pub labels: &'static [&'static str],
}

impl Family {
    /// The sample name Prometheus' text format gives it (`_<unit>`, `_total` for counters).
    pub(crate) fn sample(&self) -> String {
        let total = if self.kind == Kind::Counter {
            "_total"
        } else {
            ""
        };
        format!("{}{}{total}", self.name, self.unit.suffix())
    }
}

const fn family(
    name: &'static str,
    kind: Kind,
    unit: Unit,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        unit,
        help,
        labels,
    }
}

use Kind::{Counter, Gauge};
const SINK: &[&str] = &["sink"];
const SINK_REASON: &[&str] = &["sink", "reason"];

pub(crate) const BUILD_INFO: Family = family(
    "sonde_build_info",
    Gauge,
    Unit::None,
    &["version"],
    "The agent's version (always 1).",
);
pub(crate) const LIVE: Family = family(
    "sonde_live",
    Gauge,
    Unit::None,
    &[],
    "1 while the sampling thread makes windows on time (/healthz).",
);
pub(crate) const PIPELINE_STALLS: Family = family(
    "sonde_pipeline_stalls",
    Counter,
    Unit::None,
    &[],
    "Episodes of the sampling thread making no window for two intervals (the watchdog exits non-zero when one outlasts its limit).",
);
pub(crate) const LOCAL_RETENTION: Family = family(
    "sonde_local_retention",
    Gauge,
    Unit::Seconds,
    &[],
    "Age of the oldest window kept in the local data directory (0: none).",
);

// Export counters (`crate::export::ExportMetrics::snapshot` names them), per sink.
pub(crate) const BATCHES_SENT: Family = family(
    "sonde_export_batches_sent",
    Counter,
    Unit::None,
    SINK,
    "Windows fully delivered.",
);
pub(crate) const DROPPED_BATCHES: Family = family(
    "sonde_export_dropped_batches",
    Counter,
    Unit::None,
    SINK_REASON,
    "Windows lost by the export path, by reason.",
);
// Export gauges, per sink.
pub(crate) const QUEUED_BATCHES: Family = family(
    "sonde_export_queued_batches",
    Gauge,
    Unit::None,
    SINK,
    "Windows waiting in the export queue.",
);
pub(crate) const SPOOL_BATCHES: Family = family(
    "sonde_export_spool_batches",
    Gauge,
    Unit::None,
    SINK,
    "Windows waiting in the disk spool (remote sinks).",
);
pub(crate) const SPOOL_BYTES: Family = family(
    "sonde_export_spool",
    Gauge,
    Unit::Bytes,
    SINK,
    "Disk used by the spool's files, quarantined ones included.",
);
pub(crate) const INGEST_LAG: Family = family(
    "sonde_export_ingest_lag",
    Gauge,
    Unit::Seconds,
    SINK,
    "From the end of the last delivered window to the backend's acknowledgement.",
);
pub(crate) const OLDEST_UNDELIVERED: Family = family(
    "sonde_export_oldest_undelivered_window_age",
    Gauge,
    Unit::Seconds,
    SINK,
    "Age of the oldest window produced but not yet delivered (0: none).",
);

/// Every export counter family, in `ExportMetrics::snapshot`'s names (a test checks both agree).
pub(crate) const EXPORT_COUNTERS: &[Family] = &[
    BATCHES_SENT,
    family(
        "sonde_export_requests_sent",
        Counter,
        Unit::None,
        SINK,
        "Requests (or files) delivered.",
    ),
    family(
        "sonde_export_bytes_sent",
        Counter,
        Unit::None,
        SINK,
        "Bytes put on the wire (compressed) or on disk.",
    ),
    family(
        "sonde_export_retries",
        Counter,
        Unit::None,
        SINK,
        "Re-attempts after a retryable failure.",
    ),
    DROPPED_BATCHES,
    family(
        "sonde_export_spooled_batches",
        Counter,
        Unit::None,
        SINK,
        "Windows written to the disk spool.",
    ),
    family(
        "sonde_export_replayed_batches",
        Counter,
        Unit::None,
        SINK,
        "Spooled windows delivered (also in batches_sent).",
    ),
    family(
        "sonde_export_spool_quarantined_files",
        Counter,
        Unit::None,
        SINK,
        "Spool files that failed their checksum, set aside as *.corrupt.",
    ),
    family(
        "sonde_export_partial_success_rejected_profiles",
        Counter,
        Unit::None,
        SINK,
        "Profiles the backend rejected in a partial success.",
    ),
    family(
        "sonde_local_repairs",
        Counter,
        Unit::None,
        SINK_REASON,
        "Damage of an unclean stop repaired at start, by kind.",
    ),
    family(
        "sonde_local_retention_deleted_profiles",
        Counter,
        Unit::None,
        SINK_REASON,
        "Profiles the retention tiers deleted from the local data directory, by reason.",
    ),
];

/// Every scrape-time family (for the README check).
#[cfg(test)]
pub(crate) fn all() -> Vec<Family> {
    let mut out = vec![BUILD_INFO, LIVE, PIPELINE_STALLS, LOCAL_RETENTION];
    out.extend_from_slice(EXPORT_COUNTERS);
    out.extend([
        QUEUED_BATCHES,
        SPOOL_BATCHES,
        SPOOL_BYTES,
        INGEST_LAG,
        OLDEST_UNDELIVERED,
    ]);
    out
}

/// The declaration of export counter `name`.
pub(crate) fn export_counter(name: &str) -> Option<&'static Family> {
    EXPORT_COUNTERS.iter().find(|f| f.name == name)
}
