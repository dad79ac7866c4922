//! The accepted range of every numeric setting of `sonde run`'s configuration, in one table, checked
//! before anything starts. Out of range is an error naming the key (and its flag) and the range, so a
//! typo such as `export_interval_secs = 18446744073709551615` stops the start instead of panicking a
//! thread later.

use super::Thresholds;
use super::{ConfigError, invalid};

/// One setting's bounds, inclusive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    /// The config key, with its flag when there is one.
    pub(super) key: &'static str,
    pub(crate) min: u64,
    pub(crate) max: u64,
    /// What the number counts, for the message.
    pub(super) unit: &'static str,
}

impl Range {
    /// `value` when within bounds, else an error naming the key and the range.
    pub(crate) fn check(&self, value: u64) -> Result<u64, ConfigError> {
        if (self.min..=self.max).contains(&value) {
            return Ok(value);
        }
        Err(invalid(
            self.key,
            &value.to_string(),
            &format!(
                "must be between {} and {} {}",
                self.min, self.max, self.unit
            ),
        ))
    }
}

/// An hour: longer windows make profiles too coarse to be useful and health checks meaningless.
pub(super) const EXPORT_INTERVAL_SECS: Range = Range {
    key: "export_interval_secs (--export-interval)",
    min: 1,
    max: 3600,
    unit: "seconds",
};
pub(super) const QUEUE_CAPACITY: Range = Range {
    key: "queue_capacity",
    min: 1,
    max: 1024,
    unit: "windows",
};
pub(super) const METADATA_CACHE_CAPACITY: Range = Range {
    key: "metadata.cache_capacity",
    min: 1,
    max: 1_000_000,
    unit: "processes",
};
/// Ten minutes: beyond it a hanging backend holds a window longer than any export interval.
pub(super) const OTLP_TIMEOUT_SECS: Range = Range {
    key: "otlp.timeout_secs",
    min: 1,
    max: 600,
    unit: "seconds",
};
/// gRPC servers refuse requests far below 256 MiB by default; 64 KiB keeps splitting sane.
pub(super) const OTLP_MAX_REQUEST_BYTES: Range = Range {
    key: "otlp.max_request_bytes",
    min: 64 * 1024,
    max: 256 << 20,
    unit: "bytes",
};
/// 1 TiB: a bound larger than any disk is no bound.
pub(super) const SPOOL_MAX_MIB: Range = Range {
    key: "spool_max_mib (--spool-max-mib)",
    min: 1,
    max: 1 << 20,
    unit: "MiB",
};
/// A year.
pub(super) const SPOOL_MAX_AGE_SECS: Range = Range {
    key: "spool_max_age_secs",
    min: 1,
    max: 366 * 86_400,
    unit: "seconds",
};

/// Beyond 1 kHz per CPU the sampling itself is the workload.
pub(super) const FREQUENCY_HZ: Range = Range {
    key: "frequency_hz (--frequency)",
    min: 1,
    max: 1000,
    unit: "Hz",
};
/// A million stack walks per CPU per second is more than any kernel sustains; beyond it the number
/// is a typo.
pub(super) const OFFCPU_BUDGET: Range = Range {
    key: "offcpu_budget (--offcpu-budget)",
    min: 0,
    max: 1_000_000,
    unit: "walks per CPU per second",
};
/// 4 GiB of kernel memory for unwind tables is more than any host should give a profiler.
pub(super) const MAX_UNWIND_TABLE_MIB: Range = Range {
    key: "max_unwind_table_mib (--max-unwind-table-mib)",
    min: 1,
    max: 4096,
    unit: "MiB",
};
/// A year.
pub(super) const RUN_DURATION_SECS: Range = Range {
    key: "duration_secs (--duration)",
    min: 1,
    max: 366 * 86_400,
    unit: "seconds",
};
/// A day: one window that long is one profile nobody can read.
pub(crate) const RECORD_DURATION_SECS: Range = Range {
    key: "--duration",
    min: 1,
    max: 86_400,
    unit: "seconds",
};
/// Ten seconds: a larger threshold would hide every blocking episode.
pub(crate) const MIN_BLOCK_US: Range = Range {
    key: "--min-block-us",
    min: 0,
    max: 10_000_000,
    unit: "microseconds",
};
/// The debuginfod cache, MiB: at least one.
pub(crate) const DEBUGINFOD_CACHE_MIB: Range = Range {
    key: "symbols.debuginfod_cache_mib (--debuginfod-cache-mib)",
    min: 1,
    max: u64::MAX >> 20,
    unit: "MiB",
};
/// An hour for one debuginfod request.
pub(crate) const DEBUGINFOD_TIMEOUT_SECS: Range = Range {
    key: "symbols.debuginfod_timeout_secs (--debuginfod-timeout)",
    min: 1,
    max: 3600,
    unit: "seconds",
};
pub(crate) const DEBUGINFOD_NEGATIVE_TTL_SECS: Range = Range {
    key: "symbols.debuginfod_negative_ttl_secs (--debuginfod-negative-ttl)",
    min: 0,
    max: u32::MAX as u64,
    unit: "seconds",
};

/// `[status]` thresholds: percentages within 0..=100, durations not negative, all finite.
pub(super) fn check_thresholds(t: &Thresholds) -> Result<(), ConfigError> {
    let percents = [
        (
            "status.overhead_percent_suspect",
            t.overhead_percent_suspect,
        ),
        ("status.overhead_percent_bad", t.overhead_percent_bad),
        (
            "status.complete_percent_suspect",
            t.complete_percent_suspect,
        ),
        ("status.complete_percent_bad", t.complete_percent_bad),
        (
            "status.symbolized_percent_suspect",
            t.symbolized_percent_suspect,
        ),
        ("status.symbolized_percent_bad", t.symbolized_percent_bad),
        ("status.lost_percent_suspect", t.lost_percent_suspect),
        ("status.lost_percent_bad", t.lost_percent_bad),
    ];
    for (key, v) in percents {
        if !(0.0..=100.0).contains(&v) {
            return Err(invalid(
                key,
                &v.to_string(),
                "must be a percentage, 0 to 100",
            ));
        }
    }
    let seconds = [
        (
            "status.ingest_lag_seconds_suspect",
            t.ingest_lag_seconds_suspect,
        ),
        ("status.ingest_lag_seconds_bad", t.ingest_lag_seconds_bad),
        (
            "status.undelivered_seconds_suspect",
            t.undelivered_seconds_suspect,
        ),
        ("status.undelivered_seconds_bad", t.undelivered_seconds_bad),
    ];
    for (key, v) in seconds {
        if !(v.is_finite() && v >= 0.0) {
            return Err(invalid(
                key,
                &v.to_string(),
                "must be a number of seconds, 0 or more",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_the_message_names_key_and_range() {
        assert_eq!(QUEUE_CAPACITY.check(1).unwrap(), 1);
        assert_eq!(QUEUE_CAPACITY.check(1024).unwrap(), 1024);
        let err = EXPORT_INTERVAL_SECS
            .check(u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("export_interval_secs") && err.contains("between 1 and 3600 seconds"),
            "{err}"
        );
        assert!(QUEUE_CAPACITY.check(0).is_err());
    }

    #[test]
    fn thresholds_outside_their_range_are_refused() {
        assert!(check_thresholds(&Thresholds::default()).is_ok());
        let t = Thresholds {
            lost_percent_bad: 250.0,
            ..Default::default()
        };
        let err = check_thresholds(&t).unwrap_err().to_string();
        assert!(err.contains("status.lost_percent_bad"), "{err}");
        let t = Thresholds {
            ingest_lag_seconds_bad: f64::NAN,
            ..Default::default()
        };
        assert!(check_thresholds(&t).is_err());
    }
}
