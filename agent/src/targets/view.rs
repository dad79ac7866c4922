//! What `/targets` answers and `sonde targets` prints: one JSON object per target.

use super::Target;
use crate::metadata::relabel::Labels;

/// Targets kept and dropped now, and samples of dropped targets removed at the drain so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TargetCounts {
    pub(crate) kept: u64,
    pub(crate) dropped: u64,
    pub(crate) late_samples: u64,
}

/// One target as `/targets` shows it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct TargetView {
    pub(crate) pid: u32,
    pub(crate) kept: bool,
    /// On-CPU frequency, Hz; 0 when dropped.
    pub(crate) frequency_hz: u64,
    pub(crate) discovery_labels: Labels,
    pub(crate) labels: Labels,
}

impl TargetView {
    pub(super) fn new(pid: u32, target: &Target) -> Self {
        Self {
            pid,
            kept: target.kept(),
            frequency_hz: target.hz.unwrap_or(0),
            discovery_labels: (*target.discovery).clone(),
            labels: (*target.labels).clone(),
        }
    }
}
