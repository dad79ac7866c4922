//! Self-metrics of the export path, declared in one place with stable names (Prometheus style).
//! Plain atomics: cheap to bump from any task, read with [`ExportMetrics::snapshot`] for a summary.

use std::sync::atomic::{AtomicU64, Ordering};

/// Stable metric names; labels are part of the name where a counter is split by `reason`.
pub mod names {
    /// Batches fully delivered.
    pub const BATCHES_SENT: &str = "sonde_export_batches_sent_total";
    /// Requests (or files) delivered.
    pub const REQUESTS_SENT: &str = "sonde_export_requests_sent_total";
    /// Bytes put on the wire (compressed request bodies) or on disk.
    pub const BYTES_SENT: &str = "sonde_export_bytes_sent_total";
    /// Re-attempts after a retryable failure.
    pub const RETRIES: &str = "sonde_export_retries_total";
    /// Batches dropped because the queue was full (oldest first).
    pub const DROPPED_QUEUE_FULL: &str =
        "sonde_export_dropped_batches_total{reason=\"queue_full\"}";
    /// Batches dropped because the backend rejected them for good (e.g. INVALID_ARGUMENT).
    pub const DROPPED_REJECTED: &str = "sonde_export_dropped_batches_total{reason=\"rejected\"}";
    /// Batches dropped after retrying for longer than the retry budget.
    pub const DROPPED_RETRIES_EXHAUSTED: &str =
        "sonde_export_dropped_batches_total{reason=\"retries_exhausted\"}";
    /// Batches dropped because a local write failed.
    pub const DROPPED_WRITE_FAILED: &str =
        "sonde_export_dropped_batches_total{reason=\"write_failed\"}";
    /// Profiles the backend rejected in a partial success (not retried).
    pub const PARTIAL_REJECTED_PROFILES: &str =
        "sonde_export_partial_success_rejected_profiles_total";
}

/// Counters of the export path.
#[derive(Debug, Default)]
pub struct ExportMetrics {
    /// See [`names::BATCHES_SENT`].
    pub batches_sent: AtomicU64,
    /// See [`names::REQUESTS_SENT`].
    pub requests_sent: AtomicU64,
    /// See [`names::BYTES_SENT`].
    pub bytes_sent: AtomicU64,
    /// See [`names::RETRIES`].
    pub retries: AtomicU64,
    /// See [`names::DROPPED_QUEUE_FULL`].
    pub dropped_queue_full: AtomicU64,
    /// See [`names::DROPPED_REJECTED`].
    pub dropped_rejected: AtomicU64,
    /// See [`names::DROPPED_RETRIES_EXHAUSTED`].
    pub dropped_retries_exhausted: AtomicU64,
    /// See [`names::DROPPED_WRITE_FAILED`].
    pub dropped_write_failed: AtomicU64,
    /// See [`names::PARTIAL_REJECTED_PROFILES`].
    pub partial_rejected_profiles: AtomicU64,
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

    /// Every counter with its stable name, in a fixed order.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let get = Self::get;
        vec![
            (names::BATCHES_SENT, get(&self.batches_sent)),
            (names::REQUESTS_SENT, get(&self.requests_sent)),
            (names::BYTES_SENT, get(&self.bytes_sent)),
            (names::RETRIES, get(&self.retries)),
            (names::DROPPED_QUEUE_FULL, get(&self.dropped_queue_full)),
            (names::DROPPED_REJECTED, get(&self.dropped_rejected)),
            (
                names::DROPPED_RETRIES_EXHAUSTED,
                get(&self.dropped_retries_exhausted),
            ),
            (names::DROPPED_WRITE_FAILED, get(&self.dropped_write_failed)),
            (
                names::PARTIAL_REJECTED_PROFILES,
                get(&self.partial_rejected_profiles),
            ),
        ]
    }
}

impl std::fmt::Display for ExportMetrics {
    /// One `name value` line per counter.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, value) in self.snapshot() {
            writeln!(f, "{name} {value}")?;
        }
        Ok(())
    }
}
