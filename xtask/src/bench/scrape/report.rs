//! The printed part of the scrape section: the per-round CPU table, what a scrape holds, and the
//! verdicts against the targets.

use std::time::Duration;

use super::{
    INTERVAL, Interval, PROMETHEUS_INTERVAL_S, ROUNDS, SCRAPES, SERVICE_SERIES_BOUND, SERVICES,
    Snapshot, TARGET_PERCENT, WINDOW, clock_ticks, http,
};

/// Target: the agent with its BPF programs, quiet, as a share of the machine (issue 26).
const QUIET_TARGET_PERCENT: f64 = 0.25;
use crate::bench::{Usage, cpus, median};

/// Everything the section prints.
pub(super) struct Report<'a> {
    /// (quiet, scraped) interval of each round.
    pub(super) rounds: &'a [(Interval, Interval)],
    pub(super) snapshot: &'a Snapshot,
    /// The agent's VmRSS and VmHWM after the rounds, KiB.
    pub(super) rss_kib: u64,
    pub(super) hwm_kib: u64,
    /// Workers still running after the rounds.
    pub(super) alive: usize,
    /// Workers with at least one profile in the data directory.
    pub(super) sampled_services: usize,
    /// The agent's wait4 usage and exit status.
    pub(super) usage: &'a Usage,
    /// From SIGINT to its exit.
    pub(super) exit_took: Duration,
    /// From its start to /readyz answering 200.
    pub(super) ready_after: Duration,
    /// The agent ran the relabel rules (`super::RULES`): half the services kept.
    pub(super) relabel: bool,
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT MET" }
}

impl Report<'_> {
    pub(super) fn print(&self) {
        let cpus = cpus();
        let t = INTERVAL.as_secs_f64();
        println!(
            "\n## Scrape cost: `sonde run` with {SERVICES} services ({cpus} CPUs, 99 Hz, {WINDOW} s windows{})",
            if self.relabel {
                "; relabel rules keeping half of them and mapping a label"
            } else {
                ""
            }
        );
        println!(
            "Agent CPU (utime + stime, /proc/PID/stat) over {t:.0} s quiet against {t:.0} s with {SCRAPES} \
             Prometheus-text scrapes (one connection each), {ROUNDS} interleaved rounds. Shared, noisy \
             machine: the figures are medians, and their spread over rounds is the noise."
        );
        println!(
            "| round | first | quiet CPU s | scraped CPU s | agent % of machine (quiet) | with BPF run time | CPU per scrape ms |"
        );
        println!("|---|---|---|---|---|---|---|");
        let per_scrape =
            |q: &Interval, s: &Interval| (s.cpu - q.cpu) / s.scrapes.len().max(1) as f64;
        for (i, (q, s)) in self.rounds.iter().enumerate() {
            println!(
                "| {i} | {} | {:.2} | {:.2} | {:.3}% | {:.3}% | {:.3} |",
                if i % 2 == 1 { "scraped" } else { "quiet" },
                q.cpu,
                s.cpu,
                100.0 * q.cpu / t / cpus as f64,
                100.0 * (q.cpu + q.bpf) / t / cpus as f64,
                1e3 * per_scrape(q, s),
            );
        }
        let med = |f: &dyn Fn(&(Interval, Interval)) -> f64| {
            median(self.rounds.iter().map(f).collect()).unwrap_or(f64::NAN)
        };
        let cost = med(&|(q, s)| per_scrape(q, s));
        let quiet_with_bpf = 100.0 * med(&|(q, _)| q.cpu + q.bpf) / t / cpus as f64;
        println!(
            "| median | | {:.2} | {:.2} | {:.3}% | {quiet_with_bpf:.3}% | {:.3} |",
            med(&|(q, _)| q.cpu),
            med(&|(_, s)| s.cpu),
            100.0 * med(&|(q, _)| q.cpu) / t / cpus as f64,
            1e3 * cost,
        );
        let spread = |f: &dyn Fn(&(Interval, Interval)) -> f64| {
            let v: Vec<f64> = self.rounds.iter().map(f).collect();
            v.iter().cloned().fold(f64::MIN, f64::max) - v.iter().cloned().fold(f64::MAX, f64::min)
        };
        let (quiet_spread, scraped_spread) = (spread(&|(q, _)| q.cpu), spread(&|(_, s)| s.cpu));
        println!(
            "noise: spread over rounds of quiet intervals {quiet_spread:.2} CPU s, of scraped ones \
             {scraped_spread:.2} CPU s (= {:.3} ms per scrape); clock tick {:.0} ms",
            1e3 * scraped_spread / SCRAPES as f64,
            1e3 / clock_ticks() as f64,
        );
        self.scrape_table();
        // CPU seconds once per Prometheus interval, as a share of the machine.
        let percent_of = |cpu_s: f64| 100.0 * cpu_s / PROMETHEUS_INTERVAL_S / cpus as f64;
        let percent = percent_of(cost);
        // The worst round is the bound this run supports, whatever the median says.
        let worst = self
            .rounds
            .iter()
            .map(|(q, s)| per_scrape(q, s))
            .fold(f64::MIN, f64::max);
        let bound = percent_of(worst);
        let gauges = self.service_gauges();
        println!("\n### Verdicts");
        println!(
            "- a scrape every {PROMETHEUS_INTERVAL_S:.0} s adds < {TARGET_PERCENT}% of the machine: {} \
             ({percent:.5}% = {:.3} ms per scrape / {PROMETHEUS_INTERVAL_S:.0} s / {cpus} CPUs; with the \
             worst round {bound:.5}%{})",
            verdict(percent < TARGET_PERCENT),
            1e3 * cost,
            if bound >= TARGET_PERCENT {
                "; NOT RESOLVED: the worst round exceeds the target"
            } else if cost <= 0.0 {
                "; the scrapes' cost did not show above the noise"
            } else {
                ""
            },
        );
        println!(
            "- the agent with {SERVICES} services, quiet, with its BPF run time <= {QUIET_TARGET_PERCENT}% of the \
             machine: {} (median {quiet_with_bpf:.3}%)",
            verdict(quiet_with_bpf <= QUIET_TARGET_PERCENT),
        );
        println!(
            "- per-service gauges bounded to top 10 + other (<= {SERVICE_SERIES_BOUND} series each): {} ({})",
            verdict(
                gauges
                    .iter()
                    .all(|(_, n)| (1..=SERVICE_SERIES_BOUND).contains(n))
            ),
            gauges
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        println!(
            "- sonde run exits 0 on SIGINT: {} ({}, after {:.1} s)",
            verdict(self.usage.status.success()),
            self.usage.status,
            self.exit_took.as_secs_f64(),
        );
    }

    /// Series of each per-service gauge family in the Prometheus-text scrape.
    fn service_gauges(&self) -> Vec<(&'static str, usize)> {
        [
            "sonde_service_symbolized_frame_ratio",
            "sonde_service_complete_stack_ratio",
        ]
        .into_iter()
        .map(|name| (name, http::family_series(&self.snapshot.prometheus, name)))
        .collect()
    }

    /// What one scrape holds and the agent's memory, after the rounds.
    fn scrape_table(&self) {
        let s = self.snapshot;
        let walls: Vec<f64> = self
            .rounds
            .iter()
            .flat_map(|(_, sc)| &sc.scrapes)
            .map(|d| 1e3 * d.as_secs_f64())
            .collect();
        let mut sorted = walls.clone();
        sorted.sort_by(f64::total_cmp);
        let p90 = sorted
            .get((sorted.len() * 9 / 10).min(sorted.len().saturating_sub(1)))
            .copied()
            .unwrap_or(f64::NAN);
        let processes = |state: &str| {
            http::value(
                &s.prometheus,
                &format!("sonde_processes{{state=\"{state}\"}}"),
            )
            .map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
        };
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!("\n| after the rounds | value |");
        println!("|---|---|");
        println!("| workers started / alive | {SERVICES} / {} |", self.alive);
        println!(
            "| processes sampled in the last window (`sonde_processes{{state=\"sampled\"}}`) | {} |",
            processes("sampled")
        );
        println!(
            "| processes the agent holds (`sonde_processes{{state=\"seen\"}}`) | {} |",
            processes("seen")
        );
        println!(
            "| workers with a profile over the run (distinct svc names in index.jsonl) | {} |",
            self.sampled_services
        );
        println!(
            "| series in a scrape: Prometheus text / OpenMetrics | {} / {} |",
            http::series(&s.prometheus),
            http::series(&s.openmetrics)
        );
        println!(
            "| body bytes: Prometheus text / OpenMetrics | {} / {} |",
            s.prometheus.len(),
            s.openmetrics.len()
        );
        println!(
            "| scrape wall ms: one after the rounds; median / p90 / max of the {} timed | {:.2}; {:.2} / {:.2} / {:.2} |",
            walls.len(),
            1e3 * s.wall.as_secs_f64(),
            median(walls.clone()).unwrap_or(f64::NAN),
            p90,
            sorted.last().copied().unwrap_or(f64::NAN),
        );
        for (name, n) in self.service_gauges() {
            println!("| `{name}` series | {n} |");
        }
        println!(
            "| agent RSS after the run: VmRSS / VmHWM / peak (wait4) MiB | {:.1} / {:.1} / {:.1} |",
            mib(self.rss_kib),
            mib(self.hwm_kib),
            self.usage.max_rss_kib as f64 / 1024.0,
        );
        println!(
            "| agent ready (/readyz 200) after | {:.1} s |",
            self.ready_after.as_secs_f64()
        );
    }
}
