//! Where this run's windows ended: the exit summary's figures. Windows of earlier runs (replayed from
//! the spool) are kept apart, so the run's own figures add up: produced = delivered + spooled + lost.

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals, by whose window it was.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub(super) produced: AtomicU64,
    delivered: AtomicU64,
    lost: AtomicU64,
    earlier_delivered: AtomicU64,
    earlier_lost: AtomicU64,
}

impl Tally {
    pub(super) fn delivered(&self, own: bool) {
        let c = if own {
            &self.delivered
        } else {
            &self.earlier_delivered
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn lost(&self, own: bool) {
        let c = if own { &self.lost } else { &self.earlier_lost };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The summary, with `spooled` of this run's windows still in the spool.
    pub(super) fn summary(&self, flushed: bool, spooled: u64) -> ExportSummary {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ExportSummary {
            produced: get(&self.produced),
            delivered: get(&self.delivered),
            spooled,
            lost: get(&self.lost),
            earlier_delivered: get(&self.earlier_delivered),
            earlier_lost: get(&self.earlier_lost),
            flushed,
        }
    }
}

/// Where the windows of a run ended, at its exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Windows this run handed to the exporter.
    pub produced: u64,
    /// Of those, delivered (live or replayed from the spool).
    pub delivered: u64,
    /// Of those, still in the spool (sent by a later run).
    pub spooled: u64,
    /// Of those, lost (each counted under `sonde_export_dropped_batches_total{reason}`).
    pub lost: u64,
    /// Windows of earlier runs delivered from the spool.
    pub earlier_delivered: u64,
    /// Windows of earlier runs dropped from the spool.
    pub earlier_lost: u64,
    /// Whether everything queued was delivered within the stop's flush time.
    pub flushed: bool,
}

impl ExportSummary {
    /// Whether every window produced is accounted for exactly once.
    pub fn adds_up(&self) -> bool {
        self.produced == self.delivered + self.spooled + self.lost
    }
}
