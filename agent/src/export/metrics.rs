//! Counters of the export path. Plain atomics: cheap to bump from any task. The agent's one registry
//! (`crate::metrics`) publishes them under the names [`ExportMetrics::snapshot`] gives.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the export path.
#[derive(Debug, Default)]
pub struct ExportMetrics {
    /// Batches fully delivered.
    pub batches_sent: AtomicU64,
    /// Requests (or files) delivered.
    pub requests_sent: AtomicU64,
    /// Bytes put on the wire (compressed request bodies) or on disk.
    pub bytes_sent: AtomicU64,
    /// Re-attempts after a retryable failure.
    pub retries: AtomicU64,
    /// Batches dropped because the queue was full (oldest first).
    pub dropped_queue_full: AtomicU64,
    /// Batches dropped because the backend rejected them for good (e.g. INVALID_ARGUMENT).
    pub dropped_rejected: AtomicU64,
    /// Batches dropped after retrying for longer than the retry budget.
    pub dropped_retries_exhausted: AtomicU64,
    /// Batches dropped because a local or spool write failed.
    pub dropped_write_failed: AtomicU64,
    /// Spooled batches dropped, oldest first, to keep the spool within `--spool-max-mib`.
    pub dropped_spool_full: AtomicU64,
    /// Spooled batches dropped for being older than `spool_max_age_secs`.
    pub dropped_spool_expired: AtomicU64,
    /// Batches still queued or in flight when the stop's flush time ran out, with no spool to keep them.
    pub dropped_shutdown_timeout: AtomicU64,
    /// Batches written to the disk spool (the backend failed or the queue was full).
    pub spooled: AtomicU64,
    /// Spooled batches delivered (also counted in `batches_sent`).
    pub replayed: AtomicU64,
    /// Spool files that failed their checksum or could not be read, set aside (`*.corrupt`).
    pub spool_quarantined: AtomicU64,
    /// Batches in the spool now (a gauge).
    pub spool_batches: AtomicU64,
    /// Bytes of the spool's files now, quarantined ones included (a gauge).
    pub spool_bytes: AtomicU64,
    /// Local data directory repairs at start: a torn last index line cut off.
    pub local_repaired_torn_index: AtomicU64,
    /// Local data directory repairs at start: temporary files of interrupted writes removed.
    pub local_repaired_temp_files: AtomicU64,
    /// Retention: windows merged into hourly profiles (their files deleted).
    pub retention_merged: AtomicU64,
    /// Retention: hourly profiles past their tier, deleted.
    pub retention_expired: AtomicU64,
    /// Retention: profiles deleted by the byte cap (`retention.max_mib`).
    pub retention_capped: AtomicU64,
    /// Retention: profile files no index line named (a crash between two writes), deleted.
    pub retention_orphans: AtomicU64,
    /// Profiles the backend rejected in a partial success (not retried).
    pub partial_rejected_profiles: AtomicU64,
    /// Window end to the backend's acknowledgement of the last batch delivered, milliseconds.
    pub last_ingest_lag_ms: AtomicU64,
}

impl ExportMetrics {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Sets the gauge `gauge` to `v`.
    pub fn set(gauge: &AtomicU64, v: u64) {
        gauge.store(v, Ordering::Relaxed);
    }

    /// Every counter with its metric name (without `_total`) and its `reason` label, when split by one.
    pub fn snapshot(&self) -> Vec<(&'static str, Option<&'static str>, u64)> {
        let retention = "sonde_local_retention_deleted_profiles";
        let get = Self::get;
        let dropped = "sonde_export_dropped_batches";
        vec![
            ("sonde_export_batches_sent", None, get(&self.batches_sent)),
            ("sonde_export_requests_sent", None, get(&self.requests_sent)),
            ("sonde_export_bytes_sent", None, get(&self.bytes_sent)),
            ("sonde_export_retries", None, get(&self.retries)),
            (dropped, Some("queue_full"), get(&self.dropped_queue_full)),
            (dropped, Some("rejected"), get(&self.dropped_rejected)),
            (
                dropped,
                Some("retries_exhausted"),
                get(&self.dropped_retries_exhausted),
            ),
            (
                dropped,
                Some("write_failed"),
                get(&self.dropped_write_failed),
            ),
            (dropped, Some("spool_full"), get(&self.dropped_spool_full)),
            (
                dropped,
                Some("spool_expired"),
                get(&self.dropped_spool_expired),
            ),
            (
                dropped,
                Some("shutdown_timeout"),
                get(&self.dropped_shutdown_timeout),
            ),
            ("sonde_export_spooled_batches", None, get(&self.spooled)),
            ("sonde_export_replayed_batches", None, get(&self.replayed)),
            (
                "sonde_export_spool_quarantined_files",
                None,
                get(&self.spool_quarantined),
            ),
            (
                "sonde_export_partial_success_rejected_profiles",
                None,
                get(&self.partial_rejected_profiles),
            ),
            (
                "sonde_local_repairs",
                Some("torn_index_line"),
                get(&self.local_repaired_torn_index),
            ),
            (
                "sonde_local_repairs",
                Some("temp_file"),
                get(&self.local_repaired_temp_files),
            ),
            (retention, Some("merged"), get(&self.retention_merged)),
            (retention, Some("expired"), get(&self.retention_expired)),
            (retention, Some("capped"), get(&self.retention_capped)),
            (retention, Some("orphan"), get(&self.retention_orphans)),
        ]
    }
}

impl std::fmt::Display for ExportMetrics {
    /// One `name value` line per counter.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, reason, value) in self.snapshot() {
            match reason {
                Some(reason) => writeln!(f, "{name}_total{{reason=\"{reason}\"}} {value}")?,
                None => writeln!(f, "{name}_total {value}")?,
            }
        }
        Ok(())
    }
}
