//! The binaries behind unnamed frames, with why: the list an operator reads to know which debug
//! package to install or which build to publish to debuginfod.

use std::collections::HashMap;

use super::debuginfo::Reason;

/// A binary with samples that have unnamed frames in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Offender {
    /// The mapped path (`[jit]` for anonymous code).
    pub binary: String,
    /// Why its frames have no names.
    pub reason: Reason,
    /// Samples (weighted) with at least one unnamed frame in it.
    pub samples: u64,
}

/// Unnamed-frame samples per binary, for one window.
#[derive(Default)]
pub(crate) struct Offenders {
    counts: HashMap<(String, Reason), u64>,
}

impl Offenders {
    /// Counts one sample of weight `samples` for each distinct (binary, reason) in `unnamed`.
    pub(crate) fn add_sample(
        &mut self,
        unnamed: &mut Vec<(std::borrow::Cow<'_, str>, Reason)>,
        samples: u64,
    ) {
        unnamed.sort_unstable();
        unnamed.dedup();
        for (binary, reason) in unnamed.drain(..) {
            *self
                .counts
                .entry((binary.into_owned(), reason))
                .or_default() += samples;
        }
    }

    /// The `n` largest, largest first, and starts over.
    pub(crate) fn take_top(&mut self, n: usize) -> Vec<Offender> {
        let mut all: Vec<Offender> = self
            .counts
            .drain()
            .map(|((binary, reason), samples)| Offender {
                binary,
                reason,
                samples,
            })
            .collect();
        all.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.binary.cmp(&b.binary)));
        all.truncate(n);
        all
    }
}

/// `path (reason) N; ...` for logs and summaries.
pub(crate) fn describe(offenders: &[Offender]) -> String {
    offenders
        .iter()
        .map(|o| format!("{} ({}) {}", o.binary, o.reason.as_str(), o.samples))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The offenders as JSON: `[{"binary", "reason", "samples"}]`, largest first.
pub(crate) fn json(offenders: &[Offender]) -> serde_json::Value {
    offenders
        .iter()
        .map(|o| {
            serde_json::json!({
                "binary": o.binary,
                "reason": o.reason.as_str(),
                "samples": o.samples,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_counts_once_per_binary_and_the_largest_come_first() {
        let mut o = Offenders::default();
        let mut unnamed = vec![
            ("/usr/lib/liblzma.so.5".into(), Reason::NoDebugFile),
            ("/usr/lib/liblzma.so.5".into(), Reason::NoDebugFile),
            ("[jit]".into(), Reason::NoPerfMap),
        ];
        o.add_sample(&mut unnamed, 3);
        o.add_sample(&mut vec![("[jit]".into(), Reason::NoPerfMap)], 5);
        let top = o.take_top(1);
        assert_eq!(
            top,
            vec![Offender {
                binary: "[jit]".into(),
                reason: Reason::NoPerfMap,
                samples: 8
            }]
        );
        assert!(o.take_top(5).is_empty(), "taking starts over");
        assert_eq!(describe(&top), "[jit] (no perf map) 8");
    }
}
