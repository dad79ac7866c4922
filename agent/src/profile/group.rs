//! Splits a window's profile into one profile per process: the unit that gets tagged with a workload
//! identity and exported.

use std::collections::BTreeMap;

use super::model::Profile;

/// One profile per pid, in pid order; each keeps the window's kind, times and period.
pub fn by_process(profile: &Profile) -> Vec<(u32, Profile)> {
    let mut groups: BTreeMap<u32, Vec<_>> = BTreeMap::new();
    for sample in &profile.samples {
        groups.entry(sample.pid).or_default().push(sample.clone());
    }
    groups
        .into_iter()
        .map(|(pid, samples)| {
            (
                pid,
                Profile {
                    samples,
                    ..profile.clone_empty()
                },
            )
        })
        .collect()
}

impl Profile {
    /// The same profile header with no samples.
    pub fn clone_empty(&self) -> Profile {
        Profile {
            kind: self.kind,
            time_nanos: self.time_nanos,
            duration_nanos: self.duration_nanos,
            period: self.period,
            samples: Vec::new(),
            notes: self.notes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{ProfileKind, StackSample};

    fn sample(pid: u32, n: i64) -> StackSample {
        StackSample {
            pid,
            tid: pid,
            comm: format!("p{pid}"),
            frames: Vec::new(),
            values: vec![n, n * 10],
            truncated: false,
            labels: Default::default(),
        }
    }

    #[test]
    fn groups_samples_by_pid_keeping_the_header() {
        let p = Profile {
            kind: ProfileKind::Cpu,
            time_nanos: 5,
            duration_nanos: 7,
            period: 10,
            samples: vec![sample(2, 1), sample(1, 3), sample(2, 4)],
            notes: Vec::new(),
        };
        let groups = by_process(&p);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0, 1);
        assert_eq!(
            groups[1].1.samples.iter().map(|s| s.values[0]).sum::<i64>(),
            5
        );
        assert_eq!((groups[1].1.time_nanos, groups[1].1.period), (5, 10));
    }
}
