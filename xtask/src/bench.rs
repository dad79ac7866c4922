//! `cargo xtask bench`: one run on one machine measuring a fixed CPU-bound workload alone and under each
//! profiler (sonde, `perf record -a -g`, bpftrace): slowdown versus alone, profiler CPU per wall second,
//! peak RSS, and sonde's BPF time per invocation and map memory. Sections of their own: off-CPU under a
//! context-switch storm [`offcpu`], unwinding without frame pointers against perf's DWARF mode
//! [`unwind`], symbolization [`symbols`], Python against py-spy [`python`], Go against runtime/pprof
//! [`go`], Java against JFR [`java`], Node.js against V8's profiler [`node`], short-lived processes
//! [`build`], a busy node [`busy`], relabel targets [`targets`], the thread context [`trace_context`].
//! This file holds what they share: starting, stopping and measuring a profiler.

mod build;
mod busy;
mod daemon;
mod go;
mod host;
mod java;
mod node;
mod offcpu;
mod outage;
mod python;
mod rounds;
mod scrape;
mod summary;
mod symbols;
mod targets;
mod trace_context;
mod unwind;
mod usage;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::util::{self, build_release_sonde, root};
pub(crate) use host::HostProfiler;
pub(crate) use rounds::{Rounds, interleaved};
pub(crate) use summary::{sample_cost_p50, sonde_summary, summary_number};
pub(crate) use usage::{
    BpfUsage, Measured, Span, Usage, bpf_usage, cpu_of, has_exited, stop, wait_usage,
};

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Measure this sonde binary instead of building one: the previous commit's, to compare before
    /// and after a change in the same conditions.
    #[arg(long, value_name = "PATH")]
    sonde: Option<PathBuf>,
    /// Target wall time of the CPU-bound workload alone, seconds.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Interleaved rounds of the CPU-bound section: every profiler once per round, the order reversed
    /// on odd rounds; each row is the profiler's median run by total cost.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
    cpu_rounds: u64,
    /// Iterations of `perf bench sched pipe` for the off-CPU part: about 15 s alone, so a profiler's
    /// start and its final drain weigh on its cost no more than they do over a long recording.
    #[arg(long, default_value_t = 400_000)]
    pipe_loops: u64,
    /// Interleaved rounds of the context-switch section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 3)]
    offcpu_rounds: usize,
    /// Only the off-CPU sections: the context-switch workload and the CPU-bound one under sonde
    /// offcpu (the CPU-bound workload is still calibrated and timed alone once).
    #[arg(long, conflicts_with = "unwind_only")]
    offcpu_only: bool,
    /// Instead: the daemon benchmark (50 busy processes, `sonde run`) for this many minutes.
    #[arg(long)]
    daemon_minutes: Option<u64>,
    /// Instead: the daemon's footprint over four runtimes (a C loop, python3, a JVM, Node.js), `sonde
    /// run` for this many seconds.
    #[arg(long)]
    footprint_seconds: Option<u64>,
    /// Instead: the daemon benchmark against a real OTLP receiver that is down this many minutes (10
    /// without a value) in the middle of the run (`--daemon-minutes`, default 20); see [`outage`].
    #[arg(long, num_args = 0..=1, default_missing_value = "10")]
    outage_minutes: Option<u64>,
    /// Only the CPU-bound section.
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only"])]
    cpu_only: bool,
    /// Only the unwinding comparison (skips the CPU-bound and off-CPU sections).
    #[arg(long, conflicts_with = "offcpu_only")]
    unwind_only: bool,
    /// Window each profiler records in the unwinding comparison, seconds.
    #[arg(long, default_value_t = 20)]
    unwind_seconds: u64,
    /// Interleaved rounds of the unwinding comparison (per-run numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    unwind_rounds: usize,
    /// Only the symbolization section (skips every other section).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only"])]
    symbols_only: bool,
    /// Window of each recording in the symbolization section, seconds.
    #[arg(long, default_value_t = 5)]
    symbols_seconds: u64,
    /// Interleaved rounds of the symbolization section (per-row numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    symbols_rounds: usize,
    /// Only the scrape-cost section (`sonde run` with 1,000 services, /metrics scraped).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only"])]
    scrape_only: bool,
    /// Run the scrape-cost section with relabel rules (half the services kept, a label mapped):
    /// what rules cost the agent with 1,000 services.
    #[arg(long)]
    scrape_relabel: bool,
    /// Only the Python section (a CPU-bound Python workload alone, under sonde and under py-spy).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only"])]
    python_only: bool,
    /// Timed work of the Python workload in each run of the Python section, seconds.
    #[arg(long, default_value_t = 15)]
    python_seconds: u64,
    /// Interleaved rounds of the Python section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    python_rounds: usize,
    /// Only the Go section (a stripped Go workload under sonde, perf and Go's own profiler).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only"])]
    go_only: bool,
    /// Profiled seconds of each run of the Go section.
    #[arg(long, default_value_t = 10)]
    go_seconds: u64,
    /// Interleaved rounds of the Go section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    go_rounds: usize,
    /// Only the Java section (a JIT-compiled Java workload under sonde, perf with a perf map, JFR).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only"])]
    java_only: bool,
    /// Profiled seconds of each run of the Java section.
    #[arg(long, default_value_t = 10)]
    java_seconds: u64,
    /// Interleaved rounds of the Java section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    java_rounds: usize,
    /// Only the Node.js section (a JIT-compiled JavaScript workload under sonde, perf with a perf map,
    /// V8's own profiler).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only"])]
    node_only: bool,
    /// Profiled seconds of each run of the Node.js section.
    #[arg(long, default_value_t = 8)]
    node_seconds: u64,
    /// Interleaved rounds of the Node.js section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    node_rounds: usize,
    /// Only the short-lived processes section (a gcc build loop under sonde and perf's DWARF mode).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only"])]
    build_only: bool,
    /// Recorded seconds of each run of the short-lived processes section.
    #[arg(long, default_value_t = 8)]
    build_seconds: u64,
    /// Interleaved rounds of the short-lived processes section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 2)]
    build_rounds: usize,
    /// Only the busy-node section (six real programs at once under sonde and perf's DWARF mode).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only", "build_only"])]
    busy_only: bool,
    /// Recorded seconds of each run of the busy-node section.
    #[arg(long, default_value_t = 10)]
    busy_seconds: u64,
    /// Interleaved rounds of the busy-node section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 1)]
    busy_rounds: usize,
    /// Only the trace-context section (the cost of reading each sample's span).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only", "build_only", "busy_only"])]
    trace_context_only: bool,
    /// Recorded seconds of each run of the trace-context section.
    #[arg(long, default_value_t = 8)]
    trace_context_seconds: u64,
    /// Interleaved rounds of the trace-context section (medians over rounds).
    #[arg(long, default_value_t = 3)]
    trace_context_rounds: usize,
    /// Only the targets section (a dropped process's per-sample kernel cost against a filtered one).
    #[arg(long, conflicts_with_all = ["offcpu_only", "unwind_only", "symbols_only", "scrape_only", "python_only", "go_only", "java_only", "node_only", "build_only"])]
    targets_only: bool,
    /// Measured seconds of each run of the targets section.
    #[arg(long, default_value_t = 10)]
    targets_seconds: u64,
    /// Interleaved rounds of the targets section (its numbers are medians over rounds).
    #[arg(long, default_value_t = 3)]
    targets_rounds: usize,
}

/// A profiler under test: a command started before the workload and stopped with SIGINT after it.
struct Profiler {
    name: &'static str,
    cmd: Vec<String>,
    /// Where its stderr goes (discarded when `None`).
    stderr: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let sonde = match &args.sonde {
        Some(path) => crate::image::sonde_binary(Some(path))?,
        None => build_release_sonde()?,
    };
    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    if let Some(outage) = args.outage_minutes {
        return outage::run(&sonde, &dir, args.daemon_minutes.unwrap_or(20), outage);
    }
    if let Some(minutes) = args.daemon_minutes {
        return daemon::run(&sonde, &dir, minutes);
    }
    if let Some(seconds) = args.footprint_seconds {
        return daemon::footprint(&sonde, &dir, seconds);
    }
    let unwind = unwind::Options {
        window: Duration::from_secs(args.unwind_seconds),
        rounds: args.unwind_rounds,
    };
    if args.unwind_only {
        return unwind::run(&sonde, &dir, &unwind);
    }
    let symbols = symbols::Options {
        window: Duration::from_secs(args.symbols_seconds),
        rounds: args.symbols_rounds,
    };
    if args.symbols_only {
        return symbols::run(&sonde, &dir, &symbols);
    }
    if args.scrape_only {
        return scrape::run(&sonde, &dir, args.scrape_relabel);
    }
    let python = Rounds {
        seconds: args.python_seconds,
        rounds: args.python_rounds,
    };
    if args.python_only {
        return python::run(&sonde, &dir, &python);
    }
    let go = Rounds {
        seconds: args.go_seconds,
        rounds: args.go_rounds,
    };
    if args.go_only {
        return go::run(&sonde, &dir, &go);
    }
    let java = Rounds {
        seconds: args.java_seconds,
        rounds: args.java_rounds,
    };
    if args.java_only {
        return java::run(&sonde, &dir, &java);
    }
    let node = Rounds {
        seconds: args.node_seconds,
        rounds: args.node_rounds,
    };
    if args.node_only {
        return node::run(&sonde, &dir, &node);
    }
    let build = Rounds {
        seconds: args.build_seconds,
        rounds: args.build_rounds,
    };
    if args.build_only {
        return build::run(&sonde, &dir, &build);
    }
    let busy_node = Rounds {
        seconds: args.busy_seconds,
        rounds: args.busy_rounds,
    };
    if args.busy_only {
        return busy::run(&sonde, &dir, &busy_node);
    }
    let targets = Rounds {
        seconds: args.targets_seconds,
        rounds: args.targets_rounds,
    };
    if args.targets_only {
        return targets::run(&sonde, &dir, &targets);
    }
    let (seconds, rounds) = (args.trace_context_seconds, args.trace_context_rounds);
    let trace_context = Rounds { seconds, rounds };
    if args.trace_context_only {
        return trace_context::run(&sonde, &dir, &trace_context);
    }
    let busy = Busy::calibrate(&dir, args.seconds)?;
    let offcpu = offcpu::Options {
        pipe_loops: args.pipe_loops,
        rounds: args.offcpu_rounds,
    };
    if args.offcpu_only {
        // The CPU-bound rows under sonde offcpu are read against the workload alone, which the
        // skipped CPU-bound section would otherwise have timed.
        let alone = time_workload(&mut busy.command())?;
        return offcpu::run(&sonde, &dir, &offcpu, &busy, alone);
    }
    let alone = cpu_bound(&sonde, &dir, &busy, args.cpu_rounds as usize)?;
    if args.cpu_only {
        return Ok(());
    }
    offcpu::run(&sonde, &dir, &offcpu, &busy, alone)?;
    unwind::run(&sonde, &dir, &unwind)?;
    symbols::run(&sonde, &dir, &symbols)?;
    scrape::run(&sonde, &dir, args.scrape_relabel)?;
    python::run(&sonde, &dir, &python)?;
    go::run(&sonde, &dir, &go)?;
    java::run(&sonde, &dir, &java)?;
    node::run(&sonde, &dir, &node)?;
    build::run(&sonde, &dir, &build)?;
    busy::run(&sonde, &dir, &busy_node)?;
    targets::run(&sonde, &dir, &targets)?;
    trace_context::run(&sonde, &dir, &trace_context)
}

/// The CPU-bound workload: busy_threads (frame pointers) with a fixed amount of work.
struct Busy {
    program: PathBuf,
    iterations: u64,
}

impl Busy {
    /// Builds busy_threads and sizes its work to about `seconds` of wall time alone on this machine.
    fn calibrate(dir: &Path, seconds: f64) -> anyhow::Result<Self> {
        let program = compile(
            &root().join("tests/workloads/busy_threads.c"),
            &dir.join("busy_threads"),
        )?;
        let probe = 200_000_000u64;
        let t = time_workload(Command::new(&program).arg(probe.to_string()))?;
        let iterations = (probe as f64 * seconds / t.as_secs_f64()) as u64;
        println!(
            "workload: 2 threads x {iterations} iterations (calibrated to {seconds:.0} s alone)"
        );
        Ok(Self {
            program,
            iterations,
        })
    }

    /// One run of the fixed work.
    fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.arg(self.iterations.to_string());
        c
    }
}

/// `## CPU-bound workload`: busy_threads alone (before and after) and under each sampling profiler.
/// Returns its time alone (the mean of both runs), the baseline of later CPU-bound rows.
fn cpu_bound(sonde: &Path, dir: &Path, busy: &Busy, rounds: usize) -> anyhow::Result<Duration> {
    let s = |x: &str| x.to_owned();
    let profilers = [
        Profiler {
            name: "sonde record -F 99",
            cmd: vec![
                sonde.display().to_string(),
                s("record"),
                s("--summary-json"),
                s("-"),
                s("--duration"),
                s("86400"),
                s("--frequency"),
                s("99"),
                s("--output"),
                dir.join("sonde.pb.gz").display().to_string(),
            ],
            stderr: None,
        },
        Profiler {
            name: "perf record -F 99 -a -g",
            cmd: vec![
                s("perf"),
                s("record"),
                s("-q"),
                s("-F"),
                s("99"),
                s("-a"),
                s("-g"),
                s("-o"),
                dir.join("perf.data").display().to_string(),
            ],
            stderr: None,
        },
        Profiler {
            name: "bpftrace profile:hz:99",
            cmd: vec![
                s("bpftrace"),
                s("-e"),
                s("profile:hz:99 { @[ustack, kstack] = count(); }"),
            ],
            stderr: None,
        },
    ];
    // The workload alone before every round and once after the last: machine drift shows as a spread.
    let mut alone_runs = vec![time_workload(&mut busy.command())?];
    let mut measured: Vec<Vec<Measured>> = profilers.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..profilers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            eprintln!("cpu-bound bench: round {round}, {}", profilers[i].name);
            measured[i].push(measure(&profilers[i], &mut busy.command())?);
        }
        alone_runs.push(time_workload(&mut busy.command())?);
    }
    let alone = Duration::from_secs_f64(
        median(alone_runs.iter().map(Duration::as_secs_f64).collect()).unwrap_or(0.0),
    );
    println!(
        "\n## CPU-bound workload ({} CPUs, {rounds} interleaved rounds, median run per profiler)",
        cpus()
    );
    println!(
        "alone: {:.2} s (median of runs: {})",
        alone.as_secs_f64(),
        alone_runs
            .iter()
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (p, runs) in profilers.iter().zip(&measured) {
        println!(
            "{}: % of machine per round: {}",
            p.name,
            runs.iter()
                .map(|m| format!(
                    "{:.3}% (while profiling {})",
                    m.machine_percent(),
                    m.profiling_percent()
                        .map_or("-".into(), |p| format!("{p:.3}%"))
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let measured: Vec<Measured> = measured.into_iter().map(median_run).collect();
    let rows: Vec<(&str, &Measured)> = profilers.iter().map(|p| p.name).zip(&measured).collect();
    print_rows(&rows, alone);
    Ok(alone)
}

/// The run of median total cost (the lower middle one of an even count): a real run, so the row's
/// columns stay consistent with each other.
fn median_run(mut runs: Vec<Measured>) -> Measured {
    runs.sort_by(|a, b| a.machine_percent().total_cmp(&b.machine_percent()));
    let middle = (runs.len() - 1) / 2;
    runs.swap_remove(middle)
}

/// Prints one table row per profiler: workload time against `alone`, the profiler's CPU, BPF and memory.
fn print_rows(rows: &[(&str, &Measured)], alone: Duration) {
    println!(
        "| profiler | workload s | slowdown | profiler CPU s/s | % of machine, whole run | % of machine while profiling | start CPU s | verified insns | peak RSS MiB | BPF ns/run | BPF runs/s | BPF map MiB | footprint MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, m) in rows {
        let cpu_per_s = m.usage.cpu.as_secs_f64() / m.window.as_secs_f64();
        let bpf = m.usage.bpf.filter(|b| b.runs > 0);
        let ns_per_run = bpf.map(|b| b.run_ns as f64 / b.runs as f64);
        let runs = bpf.map(|b| b.runs as f64);
        let map_mib = m.usage.bpf.map(|b| b.map_bytes as f64 / 1048576.0);
        let bpf_cpu_per_s = bpf.map_or(0.0, |b| b.run_ns as f64 / 1e9 / m.window.as_secs_f64());
        let rss_mib = m.usage.max_rss_kib as f64 / 1024.0;
        let opt =
            |v: Option<f64>, p: usize| v.map(|x| format!("{x:.p$}")).unwrap_or_else(|| "-".into());
        println!(
            "| {name} | {:.2} | {:+.2}% | {:.4} (+{:.4} BPF) | {:.3}% | {} | {} | {} | {:.1} | {} | {} | {} | {:.1} |",
            m.wall.as_secs_f64(),
            100.0 * (m.wall.as_secs_f64() / alone.as_secs_f64() - 1.0),
            cpu_per_s,
            bpf_cpu_per_s,
            m.machine_percent(),
            m.profiling_percent()
                .map_or("-".into(), |p| format!("{p:.3}%")),
            opt(m.start_cpu(), 2),
            m.usage
                .bpf
                .map_or("-".into(), |b| b.verified_insns.to_string()),
            rss_mib,
            opt(ns_per_run, 0),
            opt(runs.map(|r| r / m.window.as_secs_f64()), 0),
            opt(map_mib, 1),
            rss_mib + map_mib.unwrap_or(0.0),
        );
    }
}

/// CPUs of the machine (the denominator of "% of machine").
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Builds a C workload with frame pointers (what bpftrace and `perf -g` need).
fn compile(src: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    compile_with(src, out, &["-O2", "-g", "-fno-omit-frame-pointer"])
}

/// Builds a C workload with the given code generation flags.
pub(crate) fn compile_with(src: &Path, out: &Path, flags: &[&str]) -> anyhow::Result<PathBuf> {
    util::run(
        Command::new("gcc")
            .args(flags)
            .args(["-pthread", "-o"])
            .arg(out)
            .arg(src),
    )?;
    Ok(out.to_owned())
}

fn time_workload(cmd: &mut Command) -> anyhow::Result<Duration> {
    let start = Instant::now();
    util::run(cmd)?;
    Ok(start.elapsed())
}

/// Starts the profiler, lets it attach, runs the workload, stops the profiler with SIGINT.
fn measure(p: &Profiler, workload: &mut Command) -> anyhow::Result<Measured> {
    // Per-program run time accounting for every BPF-based profiler (off again afterwards).
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    let stderr = match &p.stderr {
        Some(path) => std::fs::File::create(path)
            .with_context(|| format!("creating {}", path.display()))?
            .into(),
        None => Stdio::null(),
    };
    let switches_before = context_switches()?;
    let started = Instant::now();
    let child = Command::new(&p.cmd[0])
        .args(&p.cmd[1..])
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", p.name))?;
    std::thread::sleep(Duration::from_secs(3));
    let (cpu_before, bpf_before) = (cpu_of(child.id()), bpf_usage(child.id()));
    let wall = match time_workload(workload) {
        Ok(wall) => wall,
        Err(e) => {
            // Not left running (and holding its BPF programs) when the workload fails.
            let _ = stop(child);
            return Err(e);
        }
    };
    let bpf = bpf_usage(child.id());
    let cpu_after = cpu_of(child.id());
    let switches = context_switches()?.saturating_sub(switches_before);
    let during = match (cpu_before, cpu_after, bpf_before.is_some() == bpf.is_some()) {
        (Some(before), Some(after), true) => Some(Span {
            wall,
            cpu: after.saturating_sub(before),
            bpf: BpfUsage::between(bpf_before, bpf),
            cpu_before: before,
        }),
        _ => None,
    };
    let mut usage = stop(child)?;
    usage.bpf = bpf;
    let window = started.elapsed();
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    Ok(Measured {
        wall,
        window,
        usage,
        switches,
        during,
    })
}

/// Context switches of the whole machine since boot (the `ctxt` line of /proc/stat).
fn context_switches() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    stat.lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
        .context("no ctxt line in /proc/stat")
}

/// Median of the values present (the mean of the middle two for an even count).
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_even_counts_is_the_middle_mean() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
