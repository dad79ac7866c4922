//! Prints the `## Symbols` section: what ran, the symbolized share per workload and row, the agent's
//! CPU and RSS against the unstripped row, debuginfod's counters and the cache on disk, and one
//! verdict per target of the issue, met or not, with its numbers.

use std::path::Path;

use super::{Options, Row, Run, Runs, WARM_UP, workloads::Workload};
use crate::bench::{cpus, median};

/// The target share of symbolized frames where debug info is reachable, %.
const TARGET_SYMBOLIZED: f64 = 95.0;

/// Warm-cache CPU counts as unchanged within this fraction of the unstripped row's...
const NOISE_FRACTION: f64 = 0.10;
/// ...or within this many CPU seconds, whichever is larger (a 5 s recording costs about 0.1-0.2 s).
const NOISE_SECONDS: f64 = 0.02;

/// Prints everything; `all[workload][row]` holds the recordings, `dir` their files.
pub(super) fn print(workloads: &[Workload], all: &[Vec<Runs>], options: &Options, dir: &Path) {
    println!("\n## Symbols ({} CPUs)", cpus());
    println!(
        "Workloads, built `-O2 -g -fomit-frame-pointer`, each recorded alone by `sonde record --pid` for \
         {} s after {} ms of warm-up: {}. Stripped = `strip --strip-all` copy; its debug info \
         (`objcopy --only-keep-debug`) is served only by a local `debuginfod` started for the section. \
         DEBUGINFOD_URLS is unset for sonde; `--debuginfod-urls` is the server or \"\", and every recording gets \
         an empty `--debuginfod-cache-dir` except the warm row, which reuses its round's cold one. \
         libc resolves from its local debug file (libc6-dbg) in every row. {} interleaved round(s), \
         odd rounds in reverse order (cold and warm stay in that order). Files: {}.",
        options.window.as_secs(),
        WARM_UP.as_millis(),
        workloads
            .iter()
            .map(|w| format!("{} ({})", w.name, w.what))
            .collect::<Vec<_>>()
            .join(", "),
        options.rounds,
        dir.display()
    );
    symbolized(workloads, all);
    costs(workloads, all);
    debuginfod(workloads, all);
    verdicts(workloads, all);
    let mut notes = Vec::new();
    for (w, rows) in workloads.iter().zip(all) {
        for (row, runs) in Row::ALL.iter().zip(rows) {
            notes.extend(
                runs.failures
                    .iter()
                    .map(|f| format!("{}, {} FAILED, {f}", w.name, row.name())),
            );
            notes.extend(runs.notes.iter().cloned());
        }
    }
    if !notes.is_empty() {
        println!("\nNotes:");
        for n in notes {
            println!("- {n}");
        }
    }
}

/// Median over the recordings of one row.
fn med(runs: &Runs, f: impl Fn(&Run) -> Option<f64>) -> Option<f64> {
    median(runs.runs.iter().filter_map(f).collect())
}

fn opt(v: Option<f64>, precision: usize) -> String {
    v.map(|x| format!("{x:.precision$}"))
        .unwrap_or_else(|| "-".into())
}

/// The row label, marked when recordings failed (their numbers are missing, not zero).
fn row_name(row: Row, runs: &Runs) -> String {
    if runs.failures.is_empty() {
        row.name().to_owned()
    } else {
        format!(
            "{} ({} of {} recordings FAILED, see notes)",
            row.name(),
            runs.failures.len(),
            runs.failures.len() + runs.runs.len()
        )
    }
}

/// One value per recording, shown once when every round agrees and as `r0 / r1 / …` otherwise.
fn per_round(runs: &Runs, f: impl Fn(&Run) -> String) -> String {
    let values: Vec<String> = runs.runs.iter().map(f).collect();
    match values.first() {
        None => "-".into(),
        Some(first) if values.iter().all(|v| v == first) => first.clone(),
        Some(_) => values.join(" / "),
    }
}

fn symbolized_frames(run: &Run) -> Option<f64> {
    run.value("symbolized_frame_ratio")
}

fn cpu_s(run: &Run) -> Option<f64> {
    Some(run.usage.cpu.as_secs_f64())
}

fn rss_mib(run: &Run) -> Option<f64> {
    Some(run.usage.max_rss_kib as f64 / 1024.0)
}

fn symbolized(workloads: &[Workload], all: &[Vec<Runs>]) {
    println!("\n### Symbolized frames (median over rounds)");
    println!(
        "symbolized_frames: sonde's summary, every frame of every sample (kernel, libc, ld.so and the \
         workload). Own frames: frames of the workload binary alone, from the --folded file: named \
         when the name is a function `nm` lists in the unstripped build, unnamed when it reads \
         `NAME+0x…`. unsymbolized_top: sonde's summary, last recording."
    );
    println!(
        "| workload | row | samples | symbolized_frames | own frames named | unsymbolized_top |"
    );
    println!("|---|---|---|---|---|---|");
    for (w, rows) in workloads.iter().zip(all) {
        for (&row, runs) in Row::ALL.iter().zip(rows) {
            let top = runs
                .runs
                .last()
                .and_then(|r| r.text("unsymbolized_top"))
                .filter(|t| !t.is_empty())
                .unwrap_or("-");
            println!(
                "| {} | {} | {} | {}% | {}% | {top} |",
                w.name,
                row_name(row, runs),
                opt(med(runs, |r| r.value("samples_cpu")), 0),
                opt(med(runs, symbolized_frames), 1),
                opt(med(runs, |r| r.own.percent()), 1),
            );
        }
    }
}

/// `+x (+y%)` of `v` against `base`.
fn delta(v: Option<f64>, base: Option<f64>, precision: usize) -> String {
    match (v, base) {
        (Some(v), Some(b)) if b > 0.0 => {
            format!("{:+.precision$} ({:+.1}%)", v - b, 100.0 * (v / b - 1.0))
        }
        _ => "-".into(),
    }
}

fn costs(workloads: &[Workload], all: &[Vec<Runs>]) {
    println!("\n### Agent cost per recording (median over rounds)");
    println!(
        "CPU: user + system of the sonde process from wait4, attach to exit (start-up, the window, \
         symbolization and writing the profile; BPF program time is not in it and does not depend on \
         symbols). Peak RSS: wait4's ru_maxrss. Deltas against the same workload's unstripped row. \
         Per round: every recording, so a delta can be read against the spread of identical runs."
    );
    println!(
        "| workload | row | sonde CPU s | vs unstripped | CPU s per round | peak RSS MiB | vs unstripped | RSS MiB per round |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (w, rows) in workloads.iter().zip(all) {
        let base = &rows[Row::Unstripped as usize];
        let (base_cpu, base_rss) = (med(base, cpu_s), med(base, rss_mib));
        for (&row, runs) in Row::ALL.iter().zip(rows) {
            let (cpu, rss) = (med(runs, cpu_s), med(runs, rss_mib));
            let each = |f: fn(&Run) -> Option<f64>, precision: usize| {
                let values: Vec<String> = runs.runs.iter().map(|r| opt(f(r), precision)).collect();
                values.join(" / ")
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                w.name,
                row_name(row, runs),
                opt(cpu, 3),
                delta(cpu, base_cpu, 3),
                each(cpu_s, 3),
                opt(rss, 1),
                delta(rss, base_rss, 1),
                each(rss_mib, 1),
            );
        }
    }
}

fn debuginfod(workloads: &[Workload], all: &[Vec<Runs>]) {
    println!(
        "\n### debuginfod and its cache (per recording: one value when all rounds agree, else r0 / r1 / …)"
    );
    println!(
        "Counters from sonde's summary. Cache: files under the recording's --debuginfod-cache-dir after \
         it exited (the warm row's is its round's cold one), apparent size and blocks allocated. \
         Misses are build ids the server lacks (e.g. the kernel's vDSO, when a sample lands in it); \
         sonde keeps an empty `.miss` marker for them in the cache."
    );
    println!(
        "| workload | row | debug files local / debuginfod | requests | fetched | cache hits | misses | failures | bytes fetched | cache files | cache KiB | cache KiB allocated |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let counter = |key: &'static str| move |r: &Run| r.text(key).unwrap_or("-").to_owned();
    for (w, rows) in workloads.iter().zip(all) {
        for (&row, runs) in Row::ALL.iter().zip(rows) {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                w.name,
                row_name(row, runs),
                per_round(runs, |r| format!(
                    "{} / {}",
                    r.text("debug_files_local").unwrap_or("-"),
                    r.text("debug_files_debuginfod").unwrap_or("-")
                )),
                per_round(runs, counter("debuginfod_requests")),
                per_round(runs, counter("debuginfod_fetched")),
                per_round(runs, counter("debuginfod_cache_hits")),
                per_round(runs, counter("debuginfod_misses")),
                per_round(runs, counter("debuginfod_failures")),
                per_round(runs, counter("debuginfod_downloaded_bytes")),
                per_round(runs, |r| r.cache.files.to_string()),
                per_round(runs, |r| format!("{:.1}", r.cache.bytes as f64 / 1024.0)),
                per_round(runs, |r| format!(
                    "{:.0}",
                    r.cache.allocated as f64 / 1024.0
                )),
            );
        }
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT MET" }
}

fn verdicts(workloads: &[Workload], all: &[Vec<Runs>]) {
    println!("\n### Verdicts");
    for row in Row::ALL {
        let per: Vec<(&str, &Runs)> = workloads
            .iter()
            .zip(all)
            .map(|(w, rows)| (w.name, &rows[row as usize]))
            .collect();
        let medians: Vec<String> = per
            .iter()
            .map(|(name, runs)| format!("{name} {}%", opt(med(runs, symbolized_frames), 1)))
            .collect();
        let values: Vec<f64> = per
            .iter()
            .flat_map(|(_, runs)| runs.runs.iter().filter_map(symbolized_frames))
            .collect();
        let lowest = values.iter().copied().fold(f64::INFINITY, f64::min);
        let complete = per.iter().all(|(_, runs)| runs.failures.is_empty());
        if !row.reachable() {
            println!(
                "- (context) {}: {} (debug info unreachable by design; no target)",
                row.name(),
                medians.join(", ")
            );
        } else if values.is_empty() {
            println!(
                "- >= {TARGET_SYMBOLIZED:.0}% of frames symbolized, {}: NOT MEASURED (no recording; see notes)",
                row.name()
            );
        } else {
            println!(
                "- >= {TARGET_SYMBOLIZED:.0}% of frames symbolized, {}: {} (medians: {}; lowest recording {lowest:.1}%{})",
                row.name(),
                verdict(complete && lowest >= TARGET_SYMBOLIZED),
                medians.join(", "),
                if complete {
                    ""
                } else {
                    "; recordings FAILED, see notes"
                },
            );
        }
    }
    warm_cpu(workloads, all);
    warm_from_disk(workloads, all);
    cold_cost(workloads, all);
}

fn warm_cpu(workloads: &[Workload], all: &[Vec<Runs>]) {
    let mut met = true;
    let mut parts = Vec::new();
    for (w, rows) in workloads.iter().zip(all) {
        let base = med(&rows[Row::Unstripped as usize], cpu_s);
        let warm = med(&rows[Row::Warm as usize], cpu_s);
        match (base, warm) {
            (Some(b), Some(v)) => {
                met &= v - b <= (NOISE_FRACTION * b).max(NOISE_SECONDS);
                parts.push(format!(
                    "{} {v:.3} s vs {b:.3} s, {}",
                    w.name,
                    delta(Some(v), Some(b), 3)
                ));
            }
            _ => {
                met = false;
                parts.push(format!("{} NOT MEASURED", w.name));
            }
        }
    }
    println!(
        "- warm-cache symbolization adds no measurable CPU over the unstripped row (within {:.0}% or {NOISE_SECONDS} CPU-s, medians): {} ({})",
        NOISE_FRACTION * 100.0,
        verdict(met),
        parts.join("; ")
    );
}

/// The warm row must take the workload's debug file from disk: a request may still go out, for a
/// build id its cold recording never sampled (the vDSO, say), so fetches are what is checked.
fn warm_from_disk(workloads: &[Workload], all: &[Vec<Runs>]) {
    let warm: Vec<&Run> = all
        .iter()
        .flat_map(|rows| &rows[Row::Warm as usize].runs)
        .collect();
    let sum = |key: &str| warm.iter().filter_map(|r| r.value(key)).sum::<f64>();
    let every_hit = warm
        .iter()
        .all(|r| r.value("debuginfod_cache_hits").is_some_and(|h| h >= 1.0));
    let (fetched, hits) = (sum("debuginfod_fetched"), sum("debuginfod_cache_hits"));
    let (requests, misses) = (sum("debuginfod_requests"), sum("debuginfod_misses"));
    println!(
        "- (check) warm cache: the workload's debug file read from disk in every warm recording, nothing fetched again: {} ({fetched:.0} fetched, {hits:.0} cache hits over {} warm recordings of {} workloads; {requests:.0} request(s) to the server, {misses:.0} of them misses: build ids it lacks that the cold recording had not sampled)",
        verdict(!warm.is_empty() && every_hit && fetched == 0.0),
        warm.len(),
        workloads.len()
    );
}

fn cold_cost(workloads: &[Workload], all: &[Vec<Runs>]) {
    let parts: Vec<String> = workloads
        .iter()
        .zip(all)
        .map(|(w, rows)| {
            let base = &rows[Row::Unstripped as usize];
            let cold = &rows[Row::Cold as usize];
            format!(
                "{} CPU {} s, RSS {} MiB, cache {} KiB",
                w.name,
                delta(med(cold, cpu_s), med(base, cpu_s), 3),
                delta(med(cold, rss_mib), med(base, rss_mib), 1),
                opt(med(cold, |r| Some(r.cache.allocated as f64 / 1024.0)), 0),
            )
        })
        .collect();
    println!(
        "- (context) cold cache (first fetch) against unstripped, medians: {}",
        parts.join("; ")
    );
}
