//! What the registry publishes that is not a live atomic elsewhere: totals folded in once per window
//! by the async side (the sampler thread hands its counters over inside each window).

use std::time::{Duration, Instant};

use sonde_abi::stat;

use super::coverage::{self, Coverage};
use crate::{
    export::Batch,
    process::CaptureStats,
    sampler::{KernelCost, Window},
    symbolize::{DebugInfoStats, PerfMapStats, SymbolizeStats},
    unwind::UnwindStats,
};

/// Services named in the per-service coverage gauges; the rest are summed as "other".
pub const TOP_SERVICES: usize = 10;

/// Totals and the last window's figures.
#[derive(Debug)]
pub struct State {
    pub windows: u64,
    /// Kernel counters summed over CPUs and windows.
    pub kernel: [u64; stat::COUNT as usize],
    pub stacks_missing: u64,
    /// On-CPU samples and tracked off-CPU episodes exported.
    pub samples_cpu: u64,
    pub samples_offcpu: u64,
    /// Frames exported, and those named.
    pub frames: u64,
    pub frames_named: u64,
    pub symbolize: SymbolizeStats,
    pub capture: CaptureStats,
    pub debug: DebugInfoStats,
    pub perf_maps: PerfMapStats,
    pub unwind: Option<UnwindStats>,
    pub kernel_cost: KernelCost,
    pub processes_held: usize,
    pub last: LastWindow,
    prev: Option<Sample>,
}

// By hand: arrays longer than 32 have no `Default`.
impl Default for State {
    fn default() -> Self {
        Self {
            windows: 0,
            kernel: [0; stat::COUNT as usize],
            stacks_missing: 0,
            samples_cpu: 0,
            samples_offcpu: 0,
            frames: 0,
            frames_named: 0,
            symbolize: SymbolizeStats::default(),
            capture: CaptureStats::default(),
            debug: DebugInfoStats::default(),
            perf_maps: PerfMapStats::default(),
            unwind: None,
            kernel_cost: KernelCost::default(),
            processes_held: 0,
            last: LastWindow::default(),
            prev: None,
        }
    }
}

/// Figures of the last window.
#[derive(Debug, Default, Clone)]
pub struct LastWindow {
    pub coverage: Coverage,
    pub per_service: Vec<(String, Coverage)>,
    pub processes_sampled: usize,
    pub lost_samples: u64,
    /// (agent CPU + BPF run time) / (wall time x CPUs) over the last window.
    pub overhead_ratio: f64,
    /// The agent's CPU seconds and BPF run seconds per wall second over the last window.
    pub agent_cpu_per_s: f64,
    pub bpf_cpu_per_s: f64,
    /// The agent's resident memory at the end of the window.
    pub rss_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    agent_cpu: f64,
    bpf: Duration,
}

impl State {
    /// Folds in one window, its batch, and the agent's CPU seconds now.
    pub fn record(&mut self, window: &Window, batch: &Batch, agent_cpu: f64, cpus: usize) {
        self.windows += 1;
        for (total, delta) in self.kernel.iter_mut().zip(window.stats.kernel) {
            *total += delta;
        }
        self.stacks_missing += window.stats.stacks_missing;
        let (cov, per_service) = coverage::of_batch(batch, TOP_SERVICES);
        for (_, p) in &batch.profiles {
            let (index, total) = match p.kind {
                crate::profile::ProfileKind::Cpu => (0, &mut self.samples_cpu),
                crate::profile::ProfileKind::OffCpu => (2, &mut self.samples_offcpu),
            };
            *total += p
                .samples
                .iter()
                .map(|s| s.values.get(index).copied().unwrap_or(0).max(0) as u64)
                .sum::<u64>();
        }
        self.frames += cov.frames;
        self.frames_named += cov.named;
        self.symbolize = window.symbolize;
        self.capture = window.capture;
        self.debug = window.debug;
        self.perf_maps = window.perf_maps;
        self.unwind = window.unwind;
        self.kernel_cost = window.kernel_cost.clone();
        self.processes_held = window.processes_held;

        let now = Sample {
            at: Instant::now(),
            agent_cpu,
            bpf: window.kernel_cost.total().1,
        };
        let (agent_cpu_per_s, bpf_cpu_per_s) = match self.prev {
            Some(prev) => {
                let wall = now.at.duration_since(prev.at).as_secs_f64().max(1e-3);
                (
                    (now.agent_cpu - prev.agent_cpu).max(0.0) / wall,
                    now.bpf.saturating_sub(prev.bpf).as_secs_f64() / wall,
                )
            }
            None => (0.0, 0.0),
        };
        self.prev = Some(now);
        let mut pids: Vec<u32> = batch
            .profiles
            .iter()
            .flat_map(|(_, p)| p.samples.iter().map(|s| s.pid))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        self.last = LastWindow {
            coverage: cov,
            per_service,
            processes_sampled: pids.len(),
            lost_samples: window.stats.lost_samples()
                + window.stats.kernel[stat::OFFCPU_MAP_FULL as usize],
            overhead_ratio: (agent_cpu_per_s + bpf_cpu_per_s) / cpus.max(1) as f64,
            agent_cpu_per_s,
            bpf_cpu_per_s,
            rss_bytes: 0,
        };
    }
}
