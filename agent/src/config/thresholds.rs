//! The `[status]` table of the config file: where `sonde status` turns a figure into a verdict. It
//! belongs to the configuration (read, range-checked and merged with it), and the status command only
//! reads it.

/// Thresholds of the verdicts: past `suspect_*` a row is suspect, past `bad_*` a smoking gun.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    pub overhead_percent_suspect: f64,
    pub overhead_percent_bad: f64,
    pub complete_percent_suspect: f64,
    pub complete_percent_bad: f64,
    pub symbolized_percent_suspect: f64,
    pub symbolized_percent_bad: f64,
    pub lost_percent_suspect: f64,
    pub lost_percent_bad: f64,
    pub ingest_lag_seconds_suspect: f64,
    pub ingest_lag_seconds_bad: f64,
    pub undelivered_seconds_suspect: f64,
    pub undelivered_seconds_bad: f64,
}

impl Default for Thresholds {
    /// From the seed's table: 1.4% overhead is normal, 61% symbolized a smoking gun, 45 s of ingest
    /// lag acceptable.
    fn default() -> Self {
        Self {
            overhead_percent_suspect: 2.0,
            overhead_percent_bad: 5.0,
            complete_percent_suspect: 90.0,
            complete_percent_bad: 70.0,
            symbolized_percent_suspect: 90.0,
            symbolized_percent_bad: 70.0,
            lost_percent_suspect: 0.1,
            lost_percent_bad: 1.0,
            ingest_lag_seconds_suspect: 60.0,
            ingest_lag_seconds_bad: 300.0,
            undelivered_seconds_suspect: 60.0,
            undelivered_seconds_bad: 600.0,
        }
    }
}
