//! What a window's figures are read from ([`Input`]), and the one place they are computed
//! ([`Running`]): counters of the components' cumulative stats become the window's increase, counters
//! are summed over windows for `/metrics`, and every share follows [`crate::ratio`].

use std::collections::HashMap;

use super::{Figures, Kind, Source, Value, all, coverage::Coverage};
use crate::{profile::Profile, profile::ProfileKind, sampler::Window};

use super::usage::Usage;

/// Services named in the per-service coverage figures; the rest are summed as "other".
pub(crate) const TOP_SERVICES: usize = 10;

/// One window and what was made of it: everything a figure may read.
pub(crate) struct Input<'a> {
    pub window: &'a Window,
    /// Coverage of the profiles as they leave (the batch for `run`, the profile for `record`).
    pub coverage: Coverage,
    /// The same per `service.name`: the top [`TOP_SERVICES`], then "other".
    pub per_service: Vec<(String, Coverage)>,
    /// Processes with samples in the window.
    pub processes_sampled: usize,
    /// On-CPU samples, and off-CPU episodes walked (tracked), in the profiles.
    pub samples_cpu: u64,
    pub samples_offcpu: u64,
    /// The agent's usage at the end of the window.
    pub usage: Usage,
    /// CPUs online on the host.
    pub cpus: usize,
}

impl<'a> Input<'a> {
    /// The input of `window` whose profiles, each with its `service.name`, are `profiles`.
    pub(crate) fn new(
        window: &'a Window,
        profiles: &[(&str, &Profile)],
        usage: Usage,
        cpus: usize,
    ) -> Self {
        let (coverage, per_service) =
            super::coverage::of_profiles(profiles.iter().copied(), TOP_SERVICES);
        let (mut samples_cpu, mut samples_offcpu) = (0, 0);
        let mut pids = Vec::new();
        for (_, p) in profiles {
            // Off-CPU values are estimates; the episodes walked (`tracked`) are what was seen.
            let (index, total) = match p.kind {
                ProfileKind::Cpu => (0, &mut samples_cpu),
                ProfileKind::OffCpu => (2, &mut samples_offcpu),
            };
            for s in &p.samples {
                *total += s.values.get(index).copied().unwrap_or(0).max(0) as u64;
                pids.push(s.pid);
            }
        }
        pids.sort_unstable();
        pids.dedup();
        Self {
            window,
            coverage,
            per_service,
            processes_sampled: pids.len(),
            samples_cpu,
            samples_offcpu,
            usage,
            cpus: cpus.max(1),
        }
    }

    /// The window's increase of kernel counter `stat`.
    pub(crate) fn k(&self, stat: u32) -> u64 {
        self.window.stats.kernel[stat as usize]
    }

    /// The window's length, seconds (at least a millisecond).
    pub(crate) fn seconds(&self) -> f64 {
        let nanos = [&self.window.on_cpu, &self.window.off_cpu]
            .into_iter()
            .flatten()
            .map(|p| p.duration_nanos)
            .max()
            .unwrap_or(0);
        (nanos as f64 / 1e9).max(1e-3)
    }
}

/// The figures so far: the last readings of cumulative sources and the totals of counters.
#[derive(Debug, Default)]
pub(crate) struct Running {
    /// Last reading of each cumulative source, by figure index and label values.
    readings: HashMap<(usize, Vec<String>), f64>,
    totals: Vec<Value>,
}

impl Running {
    /// Computes the window's figures, and folds them into the totals.
    pub(crate) fn window(&mut self, input: &Input) -> Figures {
        let first = self.totals.is_empty();
        let mut window = Vec::new();
        for (i, figure) in all().enumerate() {
            let value = match figure.source {
                Source::Kernel(stat) => Value::One(input.k(stat) as f64),
                Source::Count(read) | Source::Now(read) => Value::One(read(input)),
                Source::SoFar(read) => Value::One(self.increase(i, Vec::new(), read(input))),
                Source::Share { read, good } => {
                    let (part, whole) = read(input);
                    Value::One(if good {
                        crate::ratio::good_share(part, whole)
                    } else {
                        crate::ratio::defect_share(part, whole)
                    })
                }
                Source::Runtime { runtime, read } => {
                    let count = read(&input.window.runtimes.of(runtime));
                    Value::One(self.increase(i, Vec::new(), count as f64))
                }
                Source::KernelMean { sum, count } => {
                    let (sum, n) = (input.k(sum), input.k(count));
                    Value::One(if n > 0 { sum as f64 / n as f64 } else { 0.0 })
                }
                Source::Mean(read) => {
                    let (sum, n) = read(input);
                    Value::One(if n > 0.0 { sum / n } else { 0.0 })
                }
                Source::Rate { so_far, per_cpu } => {
                    let had = self.readings.contains_key(&(i, Vec::new()));
                    let increase = self.increase(i, Vec::new(), so_far(input));
                    let per = input.seconds() * if per_cpu { input.cpus as f64 } else { 1.0 };
                    Value::One(if had { increase / per } else { 0.0 })
                }
                Source::Labelled { read, .. } => Value::Labelled(
                    read(input)
                        .into_iter()
                        .map(|(labels, v)| match figure.kind {
                            Kind::Counter => {
                                let increase = self.increase(i, labels.clone(), v);
                                (labels, increase)
                            }
                            Kind::Gauge | Kind::Ratio => (labels, v),
                        })
                        .collect(),
                ),
            };
            window.push(value);
        }
        if first {
            self.totals = window.clone();
        } else {
            for ((figure, total), value) in all().zip(&mut self.totals).zip(&window) {
                *total = match (figure.kind, &*total, value) {
                    (Kind::Counter, Value::One(t), Value::One(v)) => Value::One(t + v),
                    (Kind::Counter, Value::Labelled(t), Value::Labelled(v)) => {
                        Value::Labelled(add_series(t, v))
                    }
                    _ => value.clone(),
                };
            }
        }
        Figures {
            window,
            totals: self.totals.clone(),
        }
    }

    /// The increase of a cumulative reading since the last one (a reset counts from 0).
    fn increase(&mut self, figure: usize, labels: Vec<String>, now: f64) -> f64 {
        let before = self.readings.insert((figure, labels), now).unwrap_or(0.0);
        if now >= before { now - before } else { now }
    }
}

/// Totals plus a window's series, matched by labels.
fn add_series(
    totals: &[(Vec<String>, f64)],
    window: &[(Vec<String>, f64)],
) -> Vec<(Vec<String>, f64)> {
    let mut out = totals.to_vec();
    for (labels, v) in window {
        match out.iter_mut().find(|(l, _)| l == labels) {
            Some((_, t)) => *t += v,
            None => out.push((labels.clone(), *v)),
        }
    }
    out
}
