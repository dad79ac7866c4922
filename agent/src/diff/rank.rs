//! Per-function self and total values of both sides, their change, its sampling error, and the ranking.
//!
//! Self is the leaf frame's function; total counts every distinct function of a stack once per sample
//! (so recursion does not inflate it). Rows are ranked by the absolute change of the normalised self value:
//! the self share by default, the value per request or per second when normalised that way.

use super::{
    load::{FnId, Loaded, Side},
    normalise::{Normalisation, delta_standard_error},
};

/// The normalised (per request / per second) self values of one function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Normalised {
    /// Base self value in the normalised unit.
    pub base: f64,
    /// New self value in the normalised unit.
    pub new: f64,
    /// `new - base`.
    pub delta: f64,
    /// Standard error of `delta`.
    pub standard_error: f64,
}

/// One function's change.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Function name.
    pub function: String,
    /// Self share of base, percent.
    pub base_self_pct: f64,
    /// Self share of new, percent.
    pub new_self_pct: f64,
    /// `new_self_pct - base_self_pct`, points.
    pub delta_self_pct: f64,
    /// Standard error of `delta_self_pct`, points.
    pub self_standard_error_pct: f64,
    /// Total (inclusive) share of base, percent.
    pub base_total_pct: f64,
    /// Total share of new, percent.
    pub new_total_pct: f64,
    /// `new_total_pct - base_total_pct`, points.
    pub delta_total_pct: f64,
    /// Self values per request or per second, when normalised that way.
    pub normalised: Option<Normalised>,
    /// The ranked change is within `noise_sigma` standard errors of zero.
    pub within_noise: bool,
}

impl Row {
    /// The change the rows are ranked by, and its standard error.
    pub fn ranked_change(&self) -> (f64, f64) {
        match self.normalised {
            Some(n) => (n.delta, n.standard_error),
            None => (self.delta_self_pct, self.self_standard_error_pct),
        }
    }
}

/// Per-side sums for the output's totals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SideTotals {
    /// Sum of values, in the sample type's unit.
    pub value: i64,
    /// Samples behind it.
    pub samples: f64,
    /// Total in the normalised unit (100 for shares).
    pub normalised: f64,
    /// Capture duration, seconds (summed over files).
    pub duration_seconds: f64,
    /// Share of the value in truncated stacks, percent.
    pub truncated_pct: f64,
    /// Files merged.
    pub files: usize,
}

impl SideTotals {
    fn of(side: &Side, factor: f64) -> Self {
        SideTotals {
            value: side.total.value,
            samples: side.total.count,
            normalised: side.total.value as f64 * factor,
            duration_seconds: side.duration_nanos as f64 / 1e9,
            truncated_pct: super::normalise::truncated_pct(side),
            files: side.files.len(),
        }
    }
}

/// The ranked diff.
#[derive(Clone, Debug)]
pub struct Diff {
    /// Rows, largest absolute ranked change first.
    pub rows: Vec<Row>,
    /// Base sums.
    pub base: SideTotals,
    /// New sums.
    pub new: SideTotals,
    /// How values were normalised.
    pub normalisation: Normalisation,
    /// Standard errors a change must exceed to count as signal.
    pub noise_sigma: f64,
}

impl Diff {
    /// Rows whose self share grew by more than `pct` points even after subtracting the noise margin.
    pub fn gate(&self, pct: f64) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| r.delta_self_pct - self.noise_sigma * r.self_standard_error_pct > pct)
            .collect()
    }
}

/// Self and total value of every function on one side, indexed by [`FnId`].
fn per_function(side: &Side, functions: usize) -> (Vec<i64>, Vec<i64>) {
    let mut self_value = vec![0i64; functions];
    let mut total_value = vec![0i64; functions];
    // The stack a function was last counted for, so each function counts once per stack.
    let mut stamp = vec![u32::MAX; functions];
    for (i, (stack, weight)) in side.stacks.iter().enumerate() {
        self_value[stack[0] as usize] += weight.value;
        for &f in stack.iter() {
            if stamp[f as usize] != i as u32 {
                stamp[f as usize] = i as u32;
                total_value[f as usize] += weight.value;
            }
        }
    }
    (self_value, total_value)
}

/// Computes and ranks the per-function changes.
pub fn rank(
    loaded: &Loaded,
    normalisation: Normalisation,
    factors: (f64, f64),
    noise_sigma: f64,
) -> Diff {
    let n = loaded.names.len();
    let (base, new) = (&loaded.base, &loaded.new);
    let (base_self, base_total) = per_function(base, n);
    let (new_self, new_total) = per_function(new, n);
    let (tb, tn) = (base.total.value as f64, new.total.value as f64);
    let (nb, nn) = (base.total.count, new.total.count);
    let mut rows = Vec::new();
    for f in 0..n {
        if base_total[f] == 0 && new_total[f] == 0 {
            continue;
        }
        let (pb, pn) = (base_self[f] as f64 / tb, new_self[f] as f64 / tn);
        let normalised = normalisation.suffix().map(|_| {
            let (b, nw) = (
                base_self[f] as f64 * factors.0,
                new_self[f] as f64 * factors.1,
            );
            // value = p * total * factor, so its error is the share's error scaled by total * factor.
            let (sb, sn) = (tb * factors.0, tn * factors.1);
            let variance = sb * sb * super::normalise::share_variance(pb, nb)
                + sn * sn * super::normalise::share_variance(pn, nn);
            Normalised {
                base: b,
                new: nw,
                delta: nw - b,
                standard_error: variance.sqrt(),
            }
        });
        let mut row = Row {
            function: loaded.names.name(f as FnId).to_owned(),
            base_self_pct: 100.0 * pb,
            new_self_pct: 100.0 * pn,
            delta_self_pct: 100.0 * (pn - pb),
            self_standard_error_pct: 100.0 * delta_standard_error(pb, nb, pn, nn),
            base_total_pct: 100.0 * base_total[f] as f64 / tb,
            new_total_pct: 100.0 * new_total[f] as f64 / tn,
            delta_total_pct: 100.0 * (new_total[f] as f64 / tn - base_total[f] as f64 / tb),
            normalised,
            within_noise: false,
        };
        let (change, error) = row.ranked_change();
        row.within_noise = change.abs() <= noise_sigma * error;
        rows.push(row);
    }
    rows.sort_by(|a, b| {
        b.ranked_change()
            .0
            .abs()
            .total_cmp(&a.ranked_change().0.abs())
            .then_with(|| a.function.cmp(&b.function))
    });
    Diff {
        rows,
        base: SideTotals::of(base, factors.0),
        new: SideTotals::of(new, factors.1),
        normalisation,
        noise_sigma,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::load::{Interner, Weight};

    /// Builds a side from `(stack leaf first, value)`; one sample per unit of value.
    fn side(names: &mut Interner, stacks: &[(&[&str], i64)]) -> Side {
        let mut side = Side::default();
        for (stack, value) in stacks {
            let ids: Box<[FnId]> = stack.iter().map(|s| names.intern(s)).collect();
            let w = Weight {
                value: *value,
                count: *value as f64,
            };
            side.total.value += w.value;
            side.total.count += w.count;
            side.stacks.insert(ids, w);
        }
        side
    }

    fn loaded(base: &[(&[&str], i64)], new: &[(&[&str], i64)]) -> Loaded {
        let mut names = Interner::default();
        let base = side(&mut names, base);
        let new = side(&mut names, new);
        Loaded {
            names,
            base,
            new,
            sample_type: "samples/count".into(),
            unit: "count".into(),
        }
    }

    #[test]
    fn self_and_total_count_recursion_once() {
        let l = loaded(
            &[(&["a", "a", "main"], 50), (&["b", "main"], 50)],
            &[(&["b", "main"], 100)],
        );
        let d = rank(&l, Normalisation::Shares, (1.0, 1.0), 2.0);
        let a = d.rows.iter().find(|r| r.function == "a").unwrap();
        assert_eq!(
            (a.base_self_pct, a.base_total_pct, a.new_total_pct),
            (50.0, 50.0, 0.0)
        );
        let main = d.rows.iter().find(|r| r.function == "main").unwrap();
        assert_eq!((main.base_total_pct, main.base_self_pct), (100.0, 0.0));
        assert_eq!(d.rows[0].delta_self_pct.abs(), 50.0);
    }

    #[test]
    fn per_request_values_and_their_error() {
        let l = loaded(&[(&["a"], 100)], &[(&["a"], 300)]);
        let norm = Normalisation::PerRequest {
            base: 10.0,
            new: 10.0,
        };
        let d = rank(&l, norm, (0.1, 0.1), 2.0);
        let n = d.rows[0].normalised.unwrap();
        assert_eq!((n.base, n.new, n.delta), (10.0, 30.0, 20.0));
        // A function that is the whole profile has share 1 on both sides: no binomial error.
        assert_eq!(n.standard_error, 0.0);
        assert_eq!(d.rows[0].delta_self_pct, 0.0);
    }

    #[test]
    fn gate_subtracts_the_noise_margin() {
        let l = loaded(&[(&["a"], 10), (&["b"], 90)], &[(&["a"], 20), (&["b"], 80)]);
        let d = rank(&l, Normalisation::Shares, (1.0, 1.0), 3.0);
        // +10 points over 100 samples per side: the standard error is 5 points, 3 sigma is 15, so noise.
        assert!(d.rows.iter().all(|r| r.within_noise));
        assert!(d.gate(0.0).is_empty());
        let d = rank(&l, Normalisation::Shares, (1.0, 1.0), 0.0);
        assert_eq!(d.gate(5.0).len(), 1);
        assert!(d.gate(10.5).is_empty());
    }
}
