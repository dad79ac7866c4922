//! Coverage of one window, read from the profiles as they leave: complete user stacks and named frames,
//! overall and per `service.name`, with bounded cardinality (the top N services by samples, the rest
//! as "other").

use std::collections::HashMap;

use crate::profile::{FrameKind, Profile, ProfileKind};

/// The label of the services beyond the top N.
pub(crate) const OTHER: &str = "other";
/// The label of profiles without a `service.name`.
pub(crate) const UNKNOWN: &str = "unknown";

/// Counts of one window, weighted by samples (on-CPU samples, tracked off-CPU episodes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Coverage {
    /// Samples.
    pub samples: u64,
    /// Frames (markers excluded).
    pub frames: u64,
    /// Frames with a function name.
    pub named: u64,
    /// Samples with a user stack.
    pub user_stacks: u64,
    /// Of those, stacks that reached a thread entry point.
    pub complete: u64,
}

impl Coverage {
    /// Named frames / frames (1 when there are no frames: nothing is missing).
    pub(crate) fn symbolized_ratio(&self) -> f64 {
        crate::ratio::good_share(self.named, self.frames)
    }

    /// Complete user stacks / user stacks (1 when there are none).
    pub(crate) fn complete_ratio(&self) -> f64 {
        crate::ratio::good_share(self.complete, self.user_stacks)
    }

    fn add(&mut self, other: &Coverage) {
        self.samples += other.samples;
        self.frames += other.frames;
        self.named += other.named;
        self.user_stacks += other.user_stacks;
        self.complete += other.complete;
    }
}

/// The coverage of profiles, each with its `service.name`, overall and per service: the `top`
/// services by samples, then [`OTHER`].
pub(crate) fn of_profiles<'a>(
    profiles: impl Iterator<Item = (&'a str, &'a Profile)>,
    top: usize,
) -> (Coverage, Vec<(String, Coverage)>) {
    let mut per: HashMap<&str, Coverage> = HashMap::new();
    for (service, profile) in profiles {
        let c = per.entry(service).or_default();
        // Off-CPU values are estimates; the episodes actually walked (`tracked`) are what was seen.
        let weight_index = match profile.kind {
            ProfileKind::Cpu => 0,
            ProfileKind::OffCpu => 2,
        };
        for s in &profile.samples {
            let w = s.values.get(weight_index).copied().unwrap_or(0).max(0) as u64;
            let (frames, named) = s
                .frames
                .iter()
                .filter(|f| f.kind != FrameKind::Marker)
                .fold((0, 0), |(n, k), f| {
                    (n + 1, k + u64::from(f.function().is_some()))
                });
            c.samples += w;
            c.frames += frames * w;
            c.named += named * w;
            if s.frames.iter().any(|f| f.kind == FrameKind::User) {
                c.user_stacks += w;
                c.complete += w * u64::from(!s.truncated);
            }
        }
    }
    let mut total = Coverage::default();
    for c in per.values() {
        total.add(c);
    }
    let mut ranked: Vec<(String, Coverage)> =
        per.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    ranked.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then(a.0.cmp(&b.0)));
    if ranked.len() > top {
        let mut other = Coverage::default();
        for (_, c) in ranked.drain(top..) {
            other.add(&c);
        }
        ranked.push((OTHER.to_owned(), other));
    }
    (total, ranked)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        export::Batch,
        metadata::{Tags, keys},
        profile::{Frame, StackSample, Symbol},
    };

    fn profile(samples: &[(u64, bool, bool)]) -> Profile {
        let frame = |named: bool| Frame {
            address: 1,
            kind: FrameKind::User,
            return_address: false,
            module: None,
            symbols: if named {
                Arc::from(vec![Symbol {
                    name: "f".into(),
                    file: None,
                    line: None,
                }])
            } else {
                Arc::from(Vec::new())
            },
        };
        Profile {
            kind: ProfileKind::Cpu,
            time_nanos: 0,
            duration_nanos: 1,
            period: 1,
            samples: samples
                .iter()
                .map(|&(n, named, truncated)| StackSample {
                    pid: 1,
                    tid: 1,
                    comm: "x".into(),
                    frames: vec![frame(named), frame(true)],
                    values: vec![n as i64, n as i64],
                    truncated,
                    labels: Default::default(),
                })
                .collect(),
            notes: Vec::new(),
        }
    }

    fn tags(service: &str) -> Tags {
        let mut t = Tags::new();
        t.insert(keys::SERVICE_NAME, service);
        t
    }

    #[test]
    fn ratios_are_weighted_and_services_beyond_the_top_are_other() {
        let batch = Batch {
            profiles: vec![
                (
                    tags("cart").into(),
                    profile(&[(30, false, false), (10, true, true)]),
                ),
                (tags("search").into(), profile(&[(5, true, false)])),
                (tags("ads").into(), profile(&[(1, true, false)])),
            ],
            ..Default::default()
        };
        let profiles = batch
            .profiles
            .iter()
            .map(|(tags, p)| (tags.get(keys::SERVICE_NAME).unwrap_or(UNKNOWN), p));
        let (total, per) = of_profiles(profiles, 1);
        assert_eq!(total.samples, 46);
        assert_eq!(per[0].0, "cart");
        // cart: 30 samples with 1 of 2 frames named, 10 with both.
        assert!((per[0].1.symbolized_ratio() - 50.0 / 80.0).abs() < 1e-9);
        assert!((per[0].1.complete_ratio() - 0.75).abs() < 1e-9);
        assert_eq!(per[1].0, OTHER);
        assert_eq!(per[1].1.samples, 6);
    }
}
