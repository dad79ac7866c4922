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
    /// Batches dropped because a local write failed.
    pub dropped_write_failed: AtomicU64,
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

    /// Every counter with its metric name (without `_total`) and its `reason` label, when split by one.
    pub fn snapshot(&self) -> Vec<(&'static str, Option<&'static str>, u64)> {
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
            (
                "sonde_export_partial_success_rejected_profiles",
                None,
                get(&self.partial_rejected_profiles),
            ),
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
