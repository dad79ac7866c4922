//! Normalisation: the common denominator that makes two captures comparable, the sampling error of a
//! share, and the warnings about captures that are not comparable as taken.
//!
//! Raw values scale with capture length, sampling rate and load, so they are never subtracted directly.
//! Each side's value is multiplied by a factor: `100 / total` (shares, the default), `1 / requests`
//! (per request) or `1e9 / duration_nanos` (per second of capture).

use super::{
    error::DiffError,
    load::{Loaded, Side},
};

/// The common denominator of the two sides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Normalisation {
    /// Each side as percentages of its own total.
    Shares,
    /// Value per request served during each capture.
    PerRequest {
        /// Requests served during the base capture.
        base: f64,
        /// Requests served during the new capture.
        new: f64,
    },
    /// Value per second of capture, from the profiles' durations (summed over merged files).
    PerSecond,
}

impl Normalisation {
    /// The factors that turn a raw base and new value into the normalised unit.
    pub fn factors(self, base: &Side, new: &Side) -> Result<(f64, f64), DiffError> {
        Ok(match self {
            Normalisation::Shares => (
                100.0 / base.total.value as f64,
                100.0 / new.total.value as f64,
            ),
            Normalisation::PerRequest { base, new } => (1.0 / base, 1.0 / new),
            Normalisation::PerSecond => {
                let per_second = |side: &Side, name| match side.duration_nanos {
                    d if d > 0 => Ok(1e9 / d as f64),
                    _ => Err(DiffError::NoDuration { side: name }),
                };
                (per_second(base, "base")?, per_second(new, "new")?)
            }
        })
    }

    /// How the normalised values are named in output (`per_request`, `per_second`), or none for shares.
    pub fn suffix(self) -> Option<&'static str> {
        match self {
            Normalisation::Shares => None,
            Normalisation::PerRequest { .. } => Some("per_request"),
            Normalisation::PerSecond => Some("per_second"),
        }
    }

    /// A sentence for the output header.
    pub fn describe(self) -> String {
        match self {
            Normalisation::Shares => "shares of each side's own total".into(),
            Normalisation::PerRequest { base, new } => {
                format!("per request ({base} base, {new} new requests)")
            }
            Normalisation::PerSecond => "per second of capture".into(),
        }
    }
}

/// Variance of a share `p` estimated from `n` samples (binomial): `p (1 - p) / n`.
pub fn share_variance(p: f64, n: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    p * (1.0 - p) / n.max(1.0)
}

/// Standard error of the difference of two independent shares, in the same unit as the shares.
pub fn delta_standard_error(p_base: f64, n_base: f64, p_new: f64, n_new: f64) -> f64 {
    (share_variance(p_base, n_base) + share_variance(p_new, n_new)).sqrt()
}

/// Share of a side's value that sits in truncated stacks, in percent.
pub fn truncated_pct(side: &Side) -> f64 {
    100.0 * side.truncated_value as f64 / side.total.value.max(1) as f64
}

/// Truncated shares further apart than this (points) get a warning.
pub const TRUNCATION_GAP_PCT: f64 = 10.0;
/// Capture durations further apart than this ratio get a warning.
pub const DURATION_RATIO: f64 = 1.1;

/// Warnings about what makes the two captures hard to compare; printed on stderr by the runner.
pub fn warnings(loaded: &Loaded, normalisation: Normalisation) -> Vec<String> {
    let (base, new) = (&loaded.base, &loaded.new);
    let mut out = Vec::new();
    if !matches!(normalisation, Normalisation::PerRequest { .. }) {
        let (b, n) = (
            base.duration_nanos as f64 / 1e9,
            new.duration_nanos as f64 / 1e9,
        );
        if b > 0.0 && n > 0.0 && b.max(n) / b.min(n) > DURATION_RATIO {
            out.push(format!(
                "capture durations differ (base {b:.1} s, new {n:.1} s) and no request counts were given: \
                 {}; pass --base-requests/--new-requests to compare per request",
                match normalisation {
                    Normalisation::PerSecond => "per-second values still move with load",
                    _ => "shares hide a change in load",
                }
            ));
        }
        if base.periods != new.periods {
            out.push(format!(
                "sampling periods differ (base {:?}, new {:?}) and no request counts were given: raw counts are \
                 not comparable; pass --base-requests/--new-requests to compare per request",
                base.periods, new.periods
            ));
        }
    }
    for (path, skipped) in base.skipped.iter().chain(&new.skipped) {
        out.push(format!(
            "skipped {skipped} malformed sample(s) of {} (--lenient): their values do not match the sample \
             types or are negative",
            path.display()
        ));
    }
    let (tb, tn) = (truncated_pct(base), truncated_pct(new));
    if (tb - tn).abs() > TRUNCATION_GAP_PCT {
        out.push(format!(
            "truncated stacks (missing frame pointers?) are {tb:.1}% of base but {tn:.1}% of new: cost lands \
             on the wrong ancestor on one side, so the diff blames the wrong functions; rebuild with frame pointers"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::load::Weight;

    fn side(value: i64, duration_nanos: i64) -> Side {
        Side {
            total: Weight {
                value,
                count: value as f64,
            },
            duration_nanos,
            ..Default::default()
        }
    }

    #[test]
    fn factors_per_normalisation() {
        let (b, n) = (side(200, 2_000_000_000), side(1000, 10_000_000_000));
        assert_eq!(Normalisation::Shares.factors(&b, &n).unwrap(), (0.5, 0.1));
        assert_eq!(
            Normalisation::PerRequest {
                base: 4.0,
                new: 8.0
            }
            .factors(&b, &n)
            .unwrap(),
            (0.25, 0.125)
        );
        assert_eq!(
            Normalisation::PerSecond.factors(&b, &n).unwrap(),
            (0.5, 0.1)
        );
        assert!(Normalisation::PerSecond.factors(&side(1, 0), &n).is_err());
    }

    #[test]
    fn binomial_standard_error() {
        // p = 0.1 over 900 samples: sqrt(0.09 / 900) = 0.01.
        assert!((share_variance(0.1, 900.0).sqrt() - 0.01).abs() < 1e-12);
        assert!((delta_standard_error(0.1, 900.0, 0.1, 900.0) - 0.01 * 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(share_variance(0.0, 10.0), 0.0);
        assert_eq!(share_variance(1.0, 10.0), 0.0);
        // More samples, less noise.
        assert!(share_variance(0.2, 10_000.0) < share_variance(0.2, 100.0));
    }
}
