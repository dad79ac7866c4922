//! Prints the `## Unwinding` section: what ran, stack completeness per profiler and workload, cost per
//! recording (medians over rounds), sonde's own summaries, the unwind tables, and one verdict per
//! target of the issue, met or not, with its numbers.

use std::path::Path;

use super::{
    Options, Runs,
    profilers::{Kind, Run, SETTLE},
    stacks::{ROOTS, Share},
    tables::{BUDGET_BYTES, Sweep, TARGET_BINARIES, Table, Tables},
    workloads::{FP_BUILD, Workloads},
};
use crate::bench::{cpus, median};

/// The target for sonde's BPF time per sample on the table path (median), ns.
const TARGET_NS_PER_SAMPLE: f64 = 5000.0;

const MIB: f64 = 1048576.0;

/// Prints everything; `dir` holds the recordings' files.
pub(super) fn print(
    workloads: &Workloads,
    all: &[Runs],
    tables: &Tables,
    options: &Options,
    dir: &Path,
) {
    println!("\n## Unwinding ({} CPUs)", cpus());
    println!(
        "All four workloads run at once, started afresh for every recording: {}. Each profiler records \
         their pids for {} s after {} s to attach; {} interleaved round(s), odd rounds in reverse order. \
         Files: {}.",
        workloads
            .list
            .iter()
            .map(|w| w.label)
            .collect::<Vec<_>>()
            .join(", "),
        options.window.as_secs(),
        SETTLE.as_secs(),
        options.rounds,
        dir.display()
    );
    shares(workloads, all);
    costs(all);
    sonde_summaries(all);
    unwind_tables(tables);
    verdicts(all, tables);
    let failures = all.iter().flat_map(|r| {
        r.failures
            .iter()
            .map(move |f| format!("{} FAILED, {f}", r.kind.name()))
    });
    let notes: Vec<String> = failures
        .chain(
            all.iter()
                .flat_map(|r| &r.runs)
                .flat_map(|r| r.notes.iter().cloned()),
        )
        .collect();
    if !notes.is_empty() {
        println!("\nNotes:");
        for n in notes {
            println!("- {n}");
        }
    }
}

fn shares(workloads: &Workloads, all: &[Runs]) {
    println!("\n### User stacks reaching a thread root (samples of all rounds)");
    println!(
        "Rule, the same for every profiler: a sample counts as complete when one of its user frames is \
         named {} (offsets and symbol versions stripped). sonde: from its --folded file; perf: `perf script --no-inline -F \
         pid,ip,sym,dso`; bpftrace: its printed `@[pid, ustack]` map.",
        ROOTS.join(", ")
    );
    let header: Vec<&str> = workloads.list.iter().map(|w| w.label).collect();
    println!("| profiler | {} | all |", header.join(" | "));
    println!("|---|{}---|", "---|".repeat(header.len()));
    for r in all {
        let mut per = vec![Share::default(); workloads.list.len()];
        for run in &r.runs {
            for (slot, s) in run.shares.iter().enumerate() {
                per[slot].merge(*s);
            }
        }
        let mut total = Share::default();
        per.iter().for_each(|s| total.merge(*s));
        let cells: Vec<String> = per.iter().chain([&total]).map(|s| share_cell(*s)).collect();
        println!("| {} | {} |", row_name(r), cells.join(" | "));
    }
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

fn share_cell(s: Share) -> String {
    match s.percent() {
        Some(p) => format!("{p:.1}% of {}", s.samples),
        None => "no samples".into(),
    }
}

fn opt(v: Option<f64>, precision: usize) -> String {
    v.map(|x| format!("{x:.precision$}"))
        .unwrap_or_else(|| "-".into())
}

/// Medians over the rounds of one profiler's per-recording numbers.
struct Cost {
    samples: Option<f64>,
    /// Samples of the workloads per sampling-program run: below 1 when ticks landed elsewhere
    /// (other processes, idle), which the numerator of ns/sample still holds (cheaply filtered).
    tick_share: Option<f64>,
    ns_per_sample: Option<f64>,
    ns_per_run: Option<f64>,
    runs_per_s: Option<f64>,
    cpu_s: Option<f64>,
    bpf_s: Option<f64>,
    machine_percent: Option<f64>,
    post_cpu_s: Option<f64>,
    machine_percent_with_post: Option<f64>,
    rss_mib: Option<f64>,
    post_rss_mib: Option<f64>,
    map_mib: Option<f64>,
}

impl Cost {
    fn of(r: &Runs) -> Self {
        let m = |f: &dyn Fn(&Run) -> Option<f64>| median(r.runs.iter().filter_map(f).collect());
        let sampling = |run: &Run| run.usage.bpf.filter(|b| b.sampling_runs > 0);
        let cpu = |run: &Run| run.usage.cpu.as_secs_f64();
        let bpf_s = |run: &Run| run.usage.bpf.map_or(0.0, |b| b.run_ns as f64 / 1e9);
        let post = |run: &Run| run.post.as_ref().map_or(0.0, |p| p.cpu.as_secs_f64());
        let share =
            |run: &Run, seconds: f64| 100.0 * seconds / run.lifetime.as_secs_f64() / cpus() as f64;
        Cost {
            samples: m(&|run| Some(run.samples as f64)),
            tick_share: m(&|run| {
                sampling(run).map(|b| 100.0 * run.samples as f64 / b.sampling_runs as f64)
            }),
            ns_per_sample: m(&|run| {
                let b = sampling(run)?;
                (run.samples > 0).then(|| b.sampling_ns as f64 / run.samples as f64)
            }),
            ns_per_run: m(&|run| {
                sampling(run).map(|b| b.sampling_ns as f64 / b.sampling_runs as f64)
            }),
            runs_per_s: m(&|run| {
                sampling(run).map(|b| b.sampling_runs as f64 / run.lifetime.as_secs_f64())
            }),
            cpu_s: m(&|run| Some(cpu(run))),
            bpf_s: m(&|run| run.usage.bpf.map(|_| bpf_s(run))),
            machine_percent: m(&|run| Some(share(run, cpu(run) + bpf_s(run)))),
            post_cpu_s: m(&|run| run.post.as_ref().map(|p| p.cpu.as_secs_f64())),
            machine_percent_with_post: m(&|run| {
                Some(share(run, cpu(run) + bpf_s(run) + post(run)))
            }),
            rss_mib: m(&|run| Some(run.usage.max_rss_kib as f64 / 1024.0)),
            post_rss_mib: m(&|run| run.post.as_ref().map(|p| p.max_rss_kib as f64 / 1024.0)),
            map_mib: m(&|run| run.usage.bpf.map(|b| b.map_bytes as f64 / MIB)),
        }
    }
}

fn costs(all: &[Runs]) {
    println!("\n### Cost per recording (median over rounds)");
    println!(
        "BPF: perf-event (sampling) programs from the profiler's fdinfo with kernel.bpf_stats_enabled=1; \
         ns/sample = their run time / samples of the workloads, ns/run = per timer tick (they run on \
         every tick of every CPU, other processes' too). % of machine = (user+sys from wait4 + all BPF \
         run time) / profiler lifetime (attach to exit) / CPUs. perf has no BPF; its in-kernel sample \
         cost (an 8 KiB user-stack copy per sample) is charged to the interrupted tasks and not counted \
         here. post = `perf script` turning perf.data into stacks (sonde and bpftrace symbolize \
         in-process), counted over the same lifetime."
    );
    println!(
        "| profiler | samples | % of ticks on workloads | BPF ns/sample | BPF ns/run | BPF runs/s | CPU s (user+sys) | BPF CPU s | % of machine | post CPU s | % of machine incl. post | peak RSS MiB | post peak RSS MiB | BPF map MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in all {
        let c = Cost::of(r);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row_name(r),
            opt(c.samples, 0),
            opt(c.tick_share, 0),
            opt(c.ns_per_sample, 0),
            opt(c.ns_per_run, 0),
            opt(c.runs_per_s, 0),
            opt(c.cpu_s, 2),
            opt(c.bpf_s, 3),
            opt(c.machine_percent, 2),
            opt(c.post_cpu_s, 2),
            opt(c.machine_percent_with_post, 2),
            opt(c.rss_mib, 1),
            opt(c.post_rss_mib, 1),
            opt(c.map_mib, 1),
        );
    }
}

/// sonde's summary keys worth a row: stack walking, tables, and its own view of its cost.
fn wanted(key: &str) -> bool {
    [
        "samples_cpu",
        "oncpu_idle",
        "symbolized_frame_ratio",
        "truncated_stack_ratio",
        "lost_samples",
        "walk",
        "frames_per_stack",
        "fallback_",
        "mappings_refresh",
        "unwind_",
        "program_errors",
        "bpf_",
        // What one sample costs on each walk path (frame pointers, tables, Python), p50 and p90.
        "oncpu_sample_nanoseconds",
        "agent_peak_resident_memory_bytes",
    ]
    .iter()
    .any(|p| key.starts_with(p))
}

fn sonde_summaries(all: &[Runs]) {
    let columns: Vec<(String, &Run)> = all
        .iter()
        .filter(|r| r.kind.is_sonde())
        .flat_map(|r| {
            r.runs
                .iter()
                .enumerate()
                .map(move |(i, run)| (format!("{} r{i}", r.kind.name()), run))
        })
        .collect();
    if columns.is_empty() {
        return;
    }
    // Every key any recording has, in first-seen order: a walk path shows only in the recordings
    // that took it (frame pointers in the fp ones).
    let mut keys: Vec<&str> = Vec::new();
    for (_, run) in &columns {
        for (key, _) in run.summary.iter().filter(|(k, _)| wanted(k)) {
            if !keys.contains(&key.as_str()) {
                keys.push(key);
            }
        }
    }
    println!(
        "\n### sonde's own summaries (every recording; bpf_ns_per_run is over all its programs and ticks)"
    );
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    println!("| key | {} |", names.join(" | "));
    println!("|---|{}", "---|".repeat(names.len()));
    for key in keys {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, run)| {
                run.summary
                    .iter()
                    .find(|(k, _)| k == key)
                    .map_or("-".into(), |(_, v)| v.clone())
            })
            .collect();
        println!("| {key} | {} |", cells.join(" | "));
    }
    let per_s: Vec<String> = columns
        .iter()
        .map(|(_, run)| {
            // Every program's runs (`bpf_program_runs[PROGRAM]`).
            let runs = run
                .summary
                .iter()
                .filter(|(k, _)| k.starts_with("bpf_program_runs["))
                .map(|(_, v)| v.parse::<f64>().ok())
                .sum::<Option<f64>>();
            let secs = run.summary_value("window_duration_seconds");
            opt(runs.zip(secs).map(|(r, s)| r / s), 0)
        })
        .collect();
    println!("| bpf_runs per s | {} |", per_s.join(" | "));
}

fn table_row(label: &str, t: &Table) {
    println!(
        "| {label} | {:.1} | {} | {} | {:.2} | {:.1} |",
        t.file_bytes as f64 / MIB,
        t.fdes,
        t.rows,
        t.bytes as f64 / MIB,
        t.build_ms
    );
}

fn unwind_tables(tables: &Tables) {
    println!(
        "\n### Unwind tables (`sonde unwind-table`: kernel bytes in whole blocks, one build each)"
    );
    println!("| binary | file MiB | FDEs | rows | table MiB | build ms |");
    println!("|---|---|---|---|---|---|");
    for t in &tables.named {
        table_row(&t.path.display().to_string(), t);
    }
    let l = &tables.largest;
    println!(
        "\nThe {TARGET_BINARIES} largest distinct x86_64 ELF binaries under /usr/bin and \
         /usr/lib/x86_64-linux-gnu (one per inode, rustc driver excluded): {}",
        sweep_line(l)
    );
    largest_tables(l);
    println!(
        "\nThis node busy (at the end of the first sonde --unwind tables window: workloads, sonde and whatever else ran), every distinct binary mapped executable by a process: {}",
        sweep_line(&tables.mapped)
    );
    largest_tables(&tables.mapped);
}

/// The five largest tables of a sweep: they decide whether it fits.
fn largest_tables(s: &Sweep) {
    let mut big: Vec<&Table> = s.tables.iter().collect();
    big.sort_by_key(|t| std::cmp::Reverse(t.bytes));
    println!("| largest of them | file MiB | FDEs | rows | table MiB | build ms |");
    println!("|---|---|---|---|---|---|");
    for t in big.iter().take(5) {
        table_row(&t.path.display().to_string(), t);
    }
}

fn sweep_line(s: &Sweep) -> String {
    let mut line = format!(
        "{} tables, {:.1} MiB, built in {:.1} s of builder time ({:.1} s wall with process starts); \
         {} of them fit in {} MiB (smallest first)",
        s.tables.len(),
        s.bytes() as f64 / MIB,
        s.build_ms() / 1000.0,
        s.wall.as_secs_f64(),
        s.fitting(BUDGET_BYTES),
        BUDGET_BYTES >> 20,
    );
    if !s.failures.is_empty() {
        let examples: Vec<String> = s
            .failures
            .iter()
            .take(3)
            .map(|(p, e)| format!("{}: {e}", p.display()))
            .collect();
        line.push_str(&format!(
            "; no table for {} (e.g. {})",
            s.failures.len(),
            examples.join("; ")
        ));
    }
    line
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT MET" }
}

fn verdicts(all: &[Runs], tables: &Tables) {
    println!("\n### Verdicts");
    let cost = |kind: Kind| {
        all.iter()
            .find(|r| r.kind == kind)
            .map(Cost::of)
            .expect("every profiler has a row")
    };
    let (sonde, fp, perf) = (
        cost(Kind::SondeTables),
        cost(Kind::SondeFp),
        cost(Kind::PerfDwarf),
    );
    match sonde.ns_per_sample {
        Some(ns) => println!(
            "- BPF time per sample on the table path <= {:.0} us (median): {} ({ns:.0} ns/sample, {} ns per tick; frame-pointer path {} ns/sample)",
            TARGET_NS_PER_SAMPLE / 1000.0,
            verdict(ns <= TARGET_NS_PER_SAMPLE),
            opt(sonde.ns_per_run, 0),
            opt(fp.ns_per_sample, 0),
        ),
        None => println!(
            "- BPF time per sample on the table path: NOT MEASURED (no successful recording with BPF run time; see notes)"
        ),
    }
    if let (Some(s), Some(p), Some(pp)) = (
        sonde.machine_percent,
        perf.machine_percent,
        perf.machine_percent_with_post,
    ) {
        println!(
            "- sonde --unwind tables total CPU below perf's in the same run: {} against perf record alone ({s:.2}% vs {p:.2}% of the machine); {} against perf record + perf script ({pp:.2}%)",
            verdict(s < p),
            verdict(s < pp),
        );
    } else {
        println!(
            "- sonde --unwind tables total CPU below perf's in the same run: NOT MEASURED (a recording failed; see notes)"
        );
    }
    let l = &tables.largest;
    println!(
        "- {TARGET_BINARIES} distinct binaries within {} MiB of tables: {} (the {TARGET_BINARIES} largest here need {:.1} MiB for the {} that have a table; {} of those fit); this node, busy, needs {:.1} MiB for {} binaries ({})",
        BUDGET_BYTES >> 20,
        verdict(l.bytes() <= BUDGET_BYTES),
        l.bytes() as f64 / MIB,
        l.tables.len(),
        l.fitting(BUDGET_BYTES),
        tables.mapped.bytes() as f64 / MIB,
        tables.mapped.tables.len(),
        if tables.mapped.bytes() <= BUDGET_BYTES {
            "within the default budget"
        } else {
            "over the default budget"
        },
    );
    if let Some(root) = all
        .iter()
        .find(|r| r.kind == Kind::SondeFp)
        .map(|r| {
            let mut s = Share::default();
            r.runs.iter().for_each(|run| s.merge(run.shares[FP_BUILD]));
            s
        })
        .and_then(Share::percent)
    {
        println!(
            "- (context) sonde --unwind fp on the frame-pointer build reaches a root in {root:.1}% of samples"
        );
    }
}
