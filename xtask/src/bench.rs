//! `cargo xtask bench`: one run on one machine measuring a fixed CPU-bound workload alone and under each
//! profiler (sonde, `perf record -a -g`, bpftrace): slowdown versus alone, profiler CPU per wall second,
//! peak RSS, and sonde's BPF time per invocation and map memory. Sections of their own: off-CPU under a
//! context-switch storm [`offcpu`], unwinding without frame pointers against perf's DWARF mode
//! [`unwind`], symbolization [`symbols`], Python against py-spy [`python`], Go against runtime/pprof
//! [`go`], Java against JFR [`java`], Node.js against V8's profiler [`node`], short-lived processes
//! [`build`], a busy node [`busy`], relabel targets [`targets`], the thread context [`trace_context`].
//! This file holds what they share: starting, stopping and measuring a profiler.

mod args;
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
mod scripted;
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
pub use args::BenchArgs;
pub(crate) use host::HostProfiler;
pub(crate) use rounds::{Rounds, interleaved};
pub(crate) use summary::{sample_cost_p50, sonde_summary, summary_number};
pub(crate) use usage::{
    BpfUsage, Measured, Span, Usage, bpf_usage, cpu_of, has_exited, stop, wait_usage,
};

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
    let (seconds, rounds) = (args.ruby_seconds, args.ruby_rounds);
    let ruby = Rounds { seconds, rounds };
    if args.ruby_only {
        return scripted::run(&scripted::RUBY, &sonde, &dir, &ruby);
    }
    let (seconds, rounds) = (args.php_seconds, args.php_rounds);
    let php = Rounds { seconds, rounds };
    if args.php_only {
        return scripted::run(&scripted::PHP, &sonde, &dir, &php);
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
    scripted::run(&scripted::RUBY, &sonde, &dir, &ruby)?;
    scripted::run(&scripted::PHP, &sonde, &dir, &php)?;
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
