//! Prints the off-CPU sections: the context-switch workload's cost per profiler (medians over
//! rounds), the sleeper's split as each profiler saw it, sonde's own sampling summaries, one verdict
//! per target of the issue, met or not, with its numbers; then the CPU-bound workload under both
//! sonde budgets.

use std::{path::Path, time::Duration};

use super::{
    Options, Runs,
    profilers::{Kind, Recording},
    split::{TEN, TRUE_RATIO, TWENTY},
};
use crate::bench::{Measured, cpus, median, print_rows};

/// The bound for default-budget sonde on the pipe benchmark, percent of the machine.
const TARGET_MACHINE_PERCENT: f64 = 1.0;

/// The bound on the split error, percent either way.
const TARGET_SPLIT_ERROR: f64 = 10.0;

const MIB: f64 = 1048576.0;

/// Prints the context-switch section; `alone` holds the pipe benchmark's runs without a profiler.
pub(super) fn print(options: &Options, alone: &[Duration], all: &[Runs], dir: &Path) {
    println!(
        "\n## Context-switch workload: perf bench sched pipe -l {} ({} CPUs)",
        options.pipe_loops,
        cpus()
    );
    println!(
        "Every run: offcpu_sleep (-O1 frame pointers; 20 ms in {TWENTY}, 10 ms in {TEN}, truly 2:1) starts \
         first, then the profiler, recording the whole machine, gets 3 s to attach, then the pipe \
         benchmark runs; the profiler is stopped before the sleeper is killed. The runs without a \
         profiler have the sleeper beside them too. {} interleaved round(s), odd rounds in reverse \
         order; numbers are medians over rounds. Files: {}.",
        options.rounds,
        dir.display()
    );
    let alone_s = median(alone.iter().map(Duration::as_secs_f64).collect());
    println!(
        "alone: {} s (runs: {})",
        opt(alone_s, 2),
        alone
            .iter()
            .map(|d| format!("{:.2}", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    costs(all, alone_s);
    splits(all);
    sonde_summaries(all);
    verdicts(all);
    let mut notes: Vec<String> = Vec::new();
    for r in all {
        notes.extend(
            r.failures
                .iter()
                .map(|f| format!("{} FAILED, {f}", r.kind.name())),
        );
        for (round, run) in &r.runs {
            if let Err(why) = &run.split {
                notes.push(format!("{} round {round}: no split: {why}", r.kind.name()));
            }
        }
    }
    if !notes.is_empty() {
        println!("\nNotes:");
        for n in notes {
            println!("- {n}");
        }
    }
}

fn opt(v: Option<f64>, precision: usize) -> String {
    v.map(|x| format!("{x:.precision$}"))
        .unwrap_or_else(|| "-".into())
}

/// The row label, marked when recordings failed (their numbers are missing, not zero).
fn row_name(r: &Runs) -> String {
    if r.failures.is_empty() {
        r.kind.name().to_owned()
    } else {
        format!(
            "{} ({} of {} recordings FAILED, see notes)",
            r.kind.name(),
            r.failures.len(),
            r.failures.len() + r.runs.len()
        )
    }
}

/// BPF run time of all the profiler's programs over the context switches of the whole machine in the
/// same span (start to BPF read), ns.
fn ns_per_switch(m: &Measured) -> Option<f64> {
    let bpf = m.usage.bpf.filter(|b| b.runs > 0)?;
    (m.switches > 0).then(|| bpf.run_ns as f64 / m.switches as f64)
}

fn costs(all: &[Runs], alone_s: Option<f64>) {
    println!("\n### Cost (median over rounds)");
    println!(
        "% of machine = (user+sys from wait4 + run time of all its BPF programs from fdinfo with \
         kernel.bpf_stats_enabled=1) / profiler lifetime / CPUs. Switches: the whole machine's, from \
         /proc/stat ctxt read just before the profiler starts and just after its BPF run time is read \
         (the true count, whatever the profiler sees); BPF ns/switch = all its BPF run time / those \
         switches (the accounting's own two clock reads per run included). walks/CPU/s and one-in max \
         are sonde's summary (offcpu_walks_per_cpu_s, offcpu_one_in_max). While profiling: the same \
         from 3 s after the profiler's start to the pipe's end (its start and shutdown left out, for \
         every profiler alike): what an always-on agent costs, and what the target is judged on."
    );
    println!(
        "| profiler | pipe s | slowdown | CPU s/s | BPF CPU s/s | % of machine | % while profiling | switches (machine) | BPF ns/switch | BPF ns/run | BPF runs/switch | walks/CPU/s | one-in max | peak RSS MiB | BPF map MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in all {
        let m = |f: &dyn Fn(&Recording) -> Option<f64>| {
            median(r.runs.iter().filter_map(|(_, run)| f(run)).collect())
        };
        let secs = |run: &Recording| run.measured.window.as_secs_f64();
        let bpf = |run: &Recording| run.measured.usage.bpf.filter(|b| b.runs > 0);
        let pipe_s = m(&|run| Some(run.measured.wall.as_secs_f64()));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row_name(r),
            opt(pipe_s, 2),
            pipe_s.zip(alone_s).map_or("-".into(), |(p, a)| format!(
                "{:+.1}%",
                100.0 * (p / a - 1.0)
            )),
            opt(
                m(&|run| Some(run.measured.usage.cpu.as_secs_f64() / secs(run))),
                4
            ),
            opt(
                m(&|run| bpf(run).map(|b| b.run_ns as f64 / 1e9 / secs(run))),
                4
            ),
            opt(m(&|run| Some(run.measured.machine_percent())), 3),
            opt(m(&|run| run.measured.profiling_percent()), 3),
            opt(m(&|run| Some(run.measured.switches as f64)), 0),
            opt(m(&|run| ns_per_switch(&run.measured)), 0),
            opt(
                m(&|run| bpf(run).map(|b| b.run_ns as f64 / b.runs as f64)),
                0
            ),
            opt(
                m(&|run| {
                    let b = bpf(run)?;
                    (run.measured.switches > 0)
                        .then(|| b.runs as f64 / run.measured.switches as f64)
                }),
                2
            ),
            opt(
                m(&|run| run.summary_value("offcpu_walks_per_cpu_second")),
                0
            ),
            opt(m(&|run| run.summary_value("offcpu_one_in_max")), 0),
            opt(
                m(&|run| Some(run.measured.usage.max_rss_kib as f64 / 1024.0)),
                1
            ),
            opt(
                m(&|run| run.measured.usage.bpf.map(|b| b.map_bytes as f64 / MIB)),
                1
            ),
        );
    }
}

/// Split errors of every round with a split, in round order.
fn errors(r: &Runs) -> Vec<f64> {
    r.runs
        .iter()
        .filter_map(|(_, run)| run.split.as_ref().ok()?.error_percent())
        .collect()
}

fn splits(all: &[Runs]) {
    println!("\n### The sleeper's split ({TWENTY} : {TEN}, truly {TRUE_RATIO}:1)");
    println!(
        "Off-CPU time of offcpu_sleep's entries with a frame named {TWENTY} against those with {TEN} \
         (offsets stripped). sonde: its --folded file (estimated nanoseconds, the first sample type); \
         bpftrace: its printed `@off[comm, kstack, ustack]` sums. error = ratio / {TRUE_RATIO} - 1. \
         Each nanosleep overshoots by the timer slack and the wake-up latency, so the truth itself is \
         a little under {TRUE_RATIO}."
    );
    println!("| profiler | {TWENTY} s | {TEN} s | ratio | error | error per round |");
    println!("|---|---|---|---|---|---|");
    for r in all {
        let m = |f: &dyn Fn(&super::split::Split) -> Option<f64>| {
            median(
                r.runs
                    .iter()
                    .filter_map(|(_, run)| f(run.split.as_ref().ok()?))
                    .collect(),
            )
        };
        let per_round: Vec<String> = r
            .runs
            .iter()
            .map(|(round, run)| match &run.split {
                Ok(s) => format!("r{round} {}", signed(s.error_percent())),
                Err(_) => format!("r{round} - (see notes)"),
            })
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            row_name(r),
            opt(m(&|s| Some(s.twenty_ns as f64 / 1e9)), 3),
            opt(m(&|s| Some(s.ten_ns as f64 / 1e9)), 3),
            opt(m(&|s| s.ratio()), 3),
            signed(median(errors(r))),
            per_round.join(", "),
        );
    }
}

fn signed(percent: Option<f64>) -> String {
    percent.map_or("-".into(), |p| format!("{p:+.1}%"))
}

/// sonde's summary keys about off-CPU sampling and its own BPF cost.
fn wanted(key: &str) -> bool {
    [
        "window_duration_seconds",
        "samples_cpu",
        "offcpu_",
        "bpf_",
        "agent_peak_resident_memory_bytes",
    ]
    .iter()
    .any(|p| key.starts_with(p))
}

fn sonde_summaries(all: &[Runs]) {
    let columns: Vec<(String, &Recording)> = all
        .iter()
        .filter(|r| r.kind.is_sonde())
        .flat_map(|r| {
            let short = match r.kind {
                Kind::SondeUnlimited => "budget 0",
                _ => "default",
            };
            r.runs
                .iter()
                .map(move |(round, run)| (format!("{short} r{round}"), run))
        })
        .collect();
    let Some((_, first)) = columns.first() else {
        return;
    };
    println!("\n### sonde's own summaries (every recording)");
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    println!("| key | {} |", names.join(" | "));
    println!("|---|{}", "---|".repeat(names.len()));
    for (key, _) in first.summary.iter().filter(|(k, _)| wanted(k)) {
        let cells: Vec<&str> = columns
            .iter()
            .map(|(_, run)| {
                run.summary
                    .iter()
                    .find(|(k, _)| k == key)
                    .map_or("-", |(_, v)| v.as_str())
            })
            .collect();
        println!("| {key} | {} |", cells.join(" | "));
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT MET" }
}

fn verdicts(all: &[Runs]) {
    println!("\n### Verdicts");
    // Judged while profiling: the start (programs verified, once per agent) is a fixed cost that a
    // 10-20 s run spreads thin or thick by its length alone; the whole run's figure is printed beside.
    let percents = |kind: Kind| -> Vec<f64> {
        all.iter()
            .filter(|r| r.kind == kind)
            .flat_map(|r| &r.runs)
            .filter_map(|(_, run)| run.measured.profiling_percent())
            .collect()
    };
    let whole = |kind: Kind| -> Option<f64> {
        median(
            all.iter()
                .filter(|r| r.kind == kind)
                .flat_map(|r| &r.runs)
                .map(|(_, run)| run.measured.machine_percent())
                .collect(),
        )
    };
    let default = percents(Kind::SondeDefault);
    let list = |v: &[f64]| {
        v.iter()
            .map(|p| format!("{p:.3}%"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match median(default.clone()) {
        Some(p) => println!(
            "- sonde, default budget, <= {TARGET_MACHINE_PERCENT}% of the machine on the pipe benchmark while profiling (median over rounds): {} ({p:.3}%; rounds {}; for comparison --offcpu-budget 0 {}%, bpftrace {}%; whole run, start included: sonde {}%, bpftrace {}%)",
            verdict(p <= TARGET_MACHINE_PERCENT),
            list(&default),
            opt(median(percents(Kind::SondeUnlimited)), 3),
            opt(median(percents(Kind::Bpftrace)), 3),
            opt(whole(Kind::SondeDefault), 3),
            opt(whole(Kind::Bpftrace), 3),
        ),
        None => println!(
            "- sonde, default budget, <= {TARGET_MACHINE_PERCENT}% of the machine: NOT MEASURED (no successful recording; see notes)"
        ),
    }
    for r in all {
        let e = errors(r);
        let missing = r.failures.len() + r.runs.len() - e.len();
        let worst = e.iter().copied().max_by(|a, b| a.abs().total_cmp(&b.abs()));
        match worst {
            Some(w) => println!(
                "- split error within ±{TARGET_SPLIT_ERROR}% in every round, {}: {} (median {}, worst {}{})",
                r.kind.name(),
                verdict(w.abs() <= TARGET_SPLIT_ERROR && missing == 0),
                signed(median(e.clone())),
                signed(Some(w)),
                if missing > 0 {
                    format!("; {missing} round(s) without a split, see notes")
                } else {
                    String::new()
                },
            ),
            None => println!(
                "- split error within ±{TARGET_SPLIT_ERROR}%, {}: NOT MEASURED (no split in any round; see notes)",
                r.kind.name()
            ),
        }
    }
}

/// Prints the CPU-bound workload under both sonde budgets against its time `alone`.
pub(super) fn busy(rows: &[(Kind, anyhow::Result<Recording>)], alone: Duration) {
    println!("\n## CPU-bound workload under sonde offcpu");
    println!(
        "The calibrated busy_threads run (alone: {:.2} s), no sleeper: few context switches, so the \
         budget should never have to sample.",
        alone.as_secs_f64()
    );
    let ok: Vec<(&str, &Measured)> = rows
        .iter()
        .filter_map(|(kind, r)| Some((kind.name(), &r.as_ref().ok()?.measured)))
        .collect();
    print_rows(&ok, alone);
    println!(
        "\n| profiler | switches (machine) | BPF ns/switch | offcpu_switches_seen | offcpu_tracked | offcpu_walks_per_cpu_s | offcpu_one_in_max |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (kind, r) in rows {
        match r {
            Ok(run) => {
                let value = |key: &str| {
                    run.summary
                        .iter()
                        .find(|(k, _)| k == key)
                        .map_or("-", |(_, v)| v.as_str())
                };
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    kind.name(),
                    run.measured.switches,
                    opt(ns_per_switch(&run.measured), 0),
                    value("offcpu_eligible"),
                    value("offcpu_switch_out"),
                    value("offcpu_walks_per_cpu_second"),
                    value("offcpu_one_in_max"),
                );
            }
            Err(e) => println!("| {} FAILED: {e:#} | | | | | | |", kind.name()),
        }
    }
}
