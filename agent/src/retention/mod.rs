//! Retention of the local data directory, in tiers: every window for `recent`, then one merged profile
//! per process identity and hour for `hourly`, and the last N hourly profiles of every release
//! (`service.version`) for `per_release`, all under a hard byte cap that deletes oldest-first.
//!
//! A gradual regression needs profiles from several releases back: "a retention policy that keeps two
//! weeks makes the six-release regression above undiagnosable". So recent history is dense, older
//! history sparse, and each release keeps a sample for longer than the two weeks of the hourly tier.
//!
//! The daemon runs a pass when one can change something (an hour crossing `recent`, an hourly profile
//! reaching its end, the cap being passed) and checks that after every window; `sonde prune` runs one
//! pass on demand. A pass rewrites the index atomically (a new file renamed over it), so a crash leaves
//! the old index or the new one, never a mix.

mod apply;
pub mod command;
mod merge;
mod plan;

use std::time::Duration;

pub(crate) use apply::Retention;

/// Why retention could not run or was misconfigured.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    /// A `[retention]` setting is out of range.
    #[error("retention.{key} = {value} is out of range: {expected}")]
    Range {
        /// The key.
        key: &'static str,
        /// Its value.
        value: u64,
        /// The allowed range.
        expected: &'static str,
    },
    /// The data directory could not be read or written.
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// Another sonde holds the data directory.
    #[error(
        "{0} is in use by a running `sonde run`, which applies the retention policy itself; stop it first"
    )]
    Busy(std::path::PathBuf),
}

/// The tiers, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Length of the merged profiles' period: an hour (seconds in tests).
    pub(crate) hour: Duration,
    pub(crate) recent: Duration,
    pub(crate) hourly: Duration,
    pub(crate) per_release: Duration,
    pub(crate) per_release_keep: usize,
    pub(crate) max_bytes: u64,
}

/// The `[retention]` table of the config file.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionFile {
    recent_secs: Option<u64>,
    hourly_secs: Option<u64>,
    per_release_secs: Option<u64>,
    per_release_keep: Option<u64>,
    max_mib: Option<u64>,
}

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;
/// Ten years: far past any retention anyone means, and far from overflowing nanoseconds.
const MAX_SECS: u64 = 3650 * DAY;

fn ranged(
    key: &'static str,
    value: Option<u64>,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
    expected: &'static str,
) -> Result<u64, RetentionError> {
    let v = value.unwrap_or(default);
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(RetentionError::Range {
            key,
            value: v,
            expected,
        })
    }
}

impl RetentionFile {
    /// The validated policy. `hour_secs` replaces the hour of the hourly tier (tests scale time down).
    pub(crate) fn policy(&self, hour_secs: Option<u64>) -> Result<Policy, RetentionError> {
        let secs = |key, v, default| ranged(key, v, default, 1..=MAX_SECS, "1 s to 10 years");
        let hour = hour_secs.unwrap_or(HOUR).clamp(1, HOUR);
        Ok(Policy {
            hour: Duration::from_secs(hour),
            recent: Duration::from_secs(secs("recent_secs", self.recent_secs, DAY)?),
            hourly: Duration::from_secs(secs("hourly_secs", self.hourly_secs, 14 * DAY)?),
            per_release: Duration::from_secs(secs(
                "per_release_secs",
                self.per_release_secs,
                90 * DAY,
            )?),
            per_release_keep: ranged(
                "per_release_keep",
                self.per_release_keep,
                24,
                0..=1_000_000,
                "0 to 1000000 hourly profiles",
            )? as usize,
            max_bytes: ranged(
                "max_mib",
                self.max_mib,
                2048,
                1..=1 << 24,
                "1 MiB to 16 TiB",
            )? << 20,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_seed_and_ranges_are_checked() {
        let p = RetentionFile::default().policy(None).unwrap();
        assert_eq!(p.recent, Duration::from_secs(DAY));
        assert_eq!(p.hourly, Duration::from_secs(14 * DAY));
        assert_eq!(p.per_release, Duration::from_secs(90 * DAY));
        assert_eq!(p.max_bytes, 2048 << 20);
        let bad = RetentionFile {
            max_mib: Some(0),
            ..Default::default()
        };
        let err = bad.policy(None).unwrap_err().to_string();
        assert!(err.contains("retention.max_mib = 0"), "{err}");
        let bad = RetentionFile {
            recent_secs: Some(u64::MAX),
            ..Default::default()
        };
        assert!(bad.policy(None).is_err());
    }
}
