//! Targets: every process sonde samples, with its discovery labels (`metadata::discovery`), the
//! labels the relabel rules leave it (`metadata::relabel`), whether they keep it and at which
//! frequency. The decision is made when a process is first seen and after each exec (the event
//! thread), again while its pod was not in the pod cache yet and whenever its pod's labels change
//! (checked every [`REFRESH_EVERY`]), and is handed to the kernel (`bpf::targets`) so a dropped
//! process costs one lookup per sample. `/targets` and `sonde targets` show them.
//!
//! `__sample_rate__`, when the rules set it, is the target's on-CPU frequency in Hz (1 to the base
//! `frequency_hz`; a higher one is capped at the base, which is the rate the perf events fire at):
//! the kernel keeps that share of the base rate's samples, and the target's profiles carry the
//! period it stands for.

mod view;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

pub(crate) use view::{TargetCounts, TargetView};

use crate::{
    bpf::targets::TargetMap,
    metadata::{
        MetadataResolver,
        discovery::names as meta,
        relabel::{Labels, Rules, strip_internal},
    },
};

/// The label that sets a target's sampling frequency.
pub(crate) const SAMPLE_RATE_LABEL: &str = "__sample_rate__";

/// How often targets whose pod may change are looked at again.
const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// One process's decision.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// Discovery labels, as the rules saw them (shared: every window asks for each target's
    /// decision, twice, and a copy of a dozen strings per process per window adds up with 1,000).
    discovery: Arc<Labels>,
    /// Labels after the rules, internal ones removed (empty when dropped).
    pub(crate) labels: Arc<Labels>,
    /// On-CPU frequency, Hz; None when dropped.
    pub(crate) hz: Option<u64>,
    /// False while the pod its cgroup names is not in the pod cache yet.
    complete: bool,
}

impl Target {
    /// Whether the rules keep it.
    pub(crate) fn kept(&self) -> bool {
        self.hz.is_some()
    }
}

struct State {
    map: Option<TargetMap>,
    by_pid: HashMap<u32, Target>,
    last_refresh: Instant,
    /// Samples of dropped targets taken before the kernel knew (first samples of a process).
    late_samples: u64,
}

/// The targets of a running agent.
pub(crate) struct Targets {
    rules: Rules,
    base_hz: u64,
    resolver: Arc<MetadataResolver>,
    state: Mutex<State>,
}

impl Targets {
    /// Targets chosen by `rules`, sampled at most at `base_hz`.
    pub(crate) fn new(rules: Rules, base_hz: u64, resolver: Arc<MetadataResolver>) -> Self {
        Self {
            rules,
            base_hz,
            resolver,
            state: Mutex::new(State {
                map: None,
                by_pid: HashMap::new(),
                last_refresh: Instant::now(),
                late_samples: 0,
            }),
        }
    }

    /// Hands the decisions to the kernel from now on.
    pub(crate) fn attach(&self, map: TargetMap) {
        self.lock().map = Some(map);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides (again) for `pid`: at its first sample and after an exec. `runtime`: the runtime
    /// sonde found in it.
    pub(crate) fn decide(&self, pid: u32, runtime: Option<&str>) -> Target {
        let (discovery, complete) = self.resolver.discovery(pid, runtime);
        let target = self.evaluate(discovery, complete);
        let mut state = self.lock();
        self.publish(&mut state, pid, &target);
        state.by_pid.insert(pid, target.clone());
        target
    }

    /// The decision of `pid`, made now if it has none yet (a process first seen at a drain).
    pub(crate) fn get_or_decide(&self, pid: u32) -> Target {
        if let Some(t) = self.lock().by_pid.get(&pid) {
            return t.clone();
        }
        self.decide(pid, None)
    }

    /// Forgets exited processes.
    pub(crate) fn forget(&self, pids: &[u32]) {
        let mut state = self.lock();
        for pid in pids {
            if state.by_pid.remove(pid).is_some()
                && let Some(map) = state.map.as_mut()
                && let Err(err) = map.remove(*pid)
            {
                tracing::warn!(pid, error = %err, "forgetting a target in the kernel failed");
            }
        }
    }

    /// Looks again at targets whose labels may have changed since: those waiting for their pod and
    /// those in a pod (its labels and annotations are watched). At most every [`REFRESH_EVERY`].
    pub(crate) fn refresh(&self) {
        let pids: Vec<(u32, Option<String>)> = {
            let mut state = self.lock();
            if state.last_refresh.elapsed() < REFRESH_EVERY {
                return;
            }
            state.last_refresh = Instant::now();
            state
                .by_pid
                .iter()
                .filter(|(_, t)| !t.complete || t.discovery.contains_key(meta::NAMESPACE))
                .map(|(pid, t)| (*pid, t.discovery.get(meta::RUNTIME).cloned()))
                .collect()
        };
        for (pid, runtime) in pids {
            let (discovery, complete) = self.resolver.discovery(pid, runtime.as_deref());
            let mut state = self.lock();
            let Some(old) = state.by_pid.get(&pid) else {
                continue;
            };
            if *old.discovery == discovery && old.complete == complete {
                continue;
            }
            let target = self.evaluate(discovery, complete);
            tracing::debug!(
                pid,
                kept = target.kept(),
                "target's labels changed: decided again"
            );
            self.publish(&mut state, pid, &target);
            state.by_pid.insert(pid, target);
        }
    }

    /// Counts samples of dropped targets removed from a window (taken before the kernel knew).
    pub(crate) fn count_late(&self, samples: u64) {
        self.lock().late_samples += samples;
    }

    /// Kept and dropped targets now, and late samples so far.
    pub(crate) fn counts(&self) -> TargetCounts {
        let state = self.lock();
        let kept = state.by_pid.values().filter(|t| t.kept()).count() as u64;
        TargetCounts {
            kept,
            dropped: state.by_pid.len() as u64 - kept,
            late_samples: state.late_samples,
        }
    }

    /// Every target, by pid, for `/targets`.
    pub(crate) fn views(&self) -> Vec<TargetView> {
        let state = self.lock();
        let mut out: Vec<TargetView> = state
            .by_pid
            .iter()
            .map(|(pid, t)| TargetView::new(*pid, t))
            .collect();
        out.sort_by_key(|v| v.pid);
        out
    }

    fn evaluate(&self, discovery: Labels, complete: bool) -> Target {
        let discovery = Arc::new(discovery);
        let Some(mut labels) = self.rules.apply((*discovery).clone()) else {
            return Target {
                discovery,
                labels: Arc::default(),
                hz: None,
                complete,
            };
        };
        let hz = match labels.get(SAMPLE_RATE_LABEL) {
            None => self.base_hz,
            Some(text) => match text.parse::<u64>() {
                Ok(hz) if hz >= 1 => hz.min(self.base_hz),
                _ => {
                    tracing::warn!(
                        value = %text,
                        "{SAMPLE_RATE_LABEL} is not a frequency in Hz (a whole number from 1): the target is sampled at the base frequency"
                    );
                    self.base_hz
                }
            },
        };
        strip_internal(&mut labels);
        Target {
            discovery,
            labels: Arc::new(labels),
            hz: Some(hz),
            complete,
        }
    }

    fn publish(&self, state: &mut State, pid: u32, target: &Target) {
        if let Some(map) = state.map.as_mut()
            && let Err(err) = map.set(pid, target.hz, self.base_hz)
        {
            // The process is then sampled at the base rate; its samples are still removed at
            // the drain when dropped (counted as late).
            tracing::warn!(pid, error = %err, "handing a target's decision to the kernel failed");
        }
    }
}

#[cfg(test)]
mod tests;
