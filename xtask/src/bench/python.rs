//! `## Python` of `cargo xtask bench`: a CPU-bound Python workload (`tests/workloads/python/py_split.py`
//! under Debian's `/usr/bin/python3`, one thread) alone, under `sonde record --runtimes go,java,node`, under
//! `sonde record (every runtime)` and under `py-spy record -r 99`, in its default blocking mode (it pauses
//! the process for each sample) and with `--nonblocking` (it reads the running process, as sonde
//! does), all at 99 Hz and attached to the
//! workload's pid, in interleaved rounds (tables show medians over rounds). Each run times the same
//! fixed span of the workload's own work loop (started by SIGUSR1 once the profiler is up; the workload
//! stays alive until the profiler has finished, so its code objects can still be read), so the
//! slowdown is its work rate against the runs alone. Reported per profiler: the slowdown, the profiler's CPU (user + system from the start of the
//! timed span to its exit, so sonde's final symbolization counts, plus its BPF run time over the span)
//! as % of the machine, BPF ns per sampling-program run and per recorded sample, and the share of
//! samples whose Python stack is complete (it reaches the script's `<module>`).

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail, ensure};

use super::{BpfUsage, bpf_usage, cpu_of, cpus, median, sonde_summary, stop};
use crate::util::root;

/// The interpreter profiled: the distribution's own (stripped, libpython linked in), as on a host.
pub(super) const PYTHON: &str = "/usr/bin/python3";

/// The issue's budget for the BPF cost of a sample with Python frames, ns.
const TARGET_BPF_NS: f64 = 8000.0;

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

/// What the workload runs under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Alone,
    SondeOff,
    SondeOn,
    /// py-spy's default: it stops the process for each sample, so its stacks are consistent.
    PySpy,
    /// `--nonblocking`: py-spy reads the running process, as sonde does, cheaper and less exact.
    PySpyNonblocking,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Alone => "alone",
            Kind::SondeOff => "sonde record -F 99 --runtimes go,java,node",
            Kind::SondeOn => "sonde record -F 99 --runtimes all",
            Kind::PySpy => "py-spy record -r 99 (blocking: pauses the process per sample)",
            Kind::PySpyNonblocking => "py-spy record -r 99 --nonblocking",
        }
    }

    fn stem(self) -> &'static str {
        match self {
            Kind::Alone => "alone",
            Kind::SondeOff => "sonde-python-off",
            Kind::SondeOn => "sonde-python-on",
            Kind::PySpy => "py-spy",
            Kind::PySpyNonblocking => "py-spy-nonblocking",
        }
    }
}

/// One timed run of the workload.
struct Run {
    kind: Kind,
    /// Work rate: rounds of the work loop per second.
    rate: f64,
    /// The profiler's cost, absent when alone.
    profiler: Option<ProfilerCost>,
}

struct ProfilerCost {
    /// User + system CPU from the start of the timed span to the profiler's exit.
    cpu: Duration,
    /// BPF usage over the timed span.
    bpf: BpfUsage,
    /// The timed span.
    span: f64,
    max_rss_kib: i64,
    /// Samples of the workload the profiler recorded, and those with a complete Python stack.
    samples: u64,
    complete: u64,
}

/// Runs the section and prints it; files are kept in `dir/python`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds > 0, "--python-seconds must be at least 1");
    let dir = dir.join("python");
    std::fs::create_dir_all(&dir)?;
    let pyspy = crate::setup::peers_python().with_file_name("py-spy");
    ensure!(
        pyspy.exists(),
        "{} is missing: run `cargo xtask setup --peers`",
        pyspy.display()
    );
    ensure!(options.rounds > 0, "--python-rounds must be at least 1");
    let kinds = [
        Kind::Alone,
        Kind::SondeOff,
        Kind::SondeOn,
        Kind::PySpy,
        Kind::PySpyNonblocking,
    ];
    let runs = super::interleaved(
        "python",
        options.rounds,
        &kinds,
        Kind::name,
        |round, kind| {
            let stem = dir.join(format!("{}-r{round}", kind.stem()));
            measure(kind, sonde, &pyspy, &stem, options.seconds)
        },
    )?;
    print(&runs, options);
    Ok(())
}

/// Starts the workload, then the profiler, lets it attach, times the work, stops the profiler.
fn measure(
    kind: Kind,
    sonde: &Path,
    pyspy: &Path,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let (mut workload, mut out) = start_workload(seconds)?;
    let pid = workload.id();
    let profiler = match kind {
        Kind::Alone => None,
        Kind::SondeOff | Kind::SondeOn => Some(start_sonde(sonde, pid, kind, stem)?),
        Kind::PySpy => Some(start_pyspy(pyspy, pid, stem, false)?),
        Kind::PySpyNonblocking => Some(start_pyspy(pyspy, pid, stem, true)?),
    };
    // Per-program run time accounting (off again afterwards).
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    // Attached and past its start (BPF load, first process scan) before the timed work begins.
    std::thread::sleep(Duration::from_secs(3));
    let before = profiler
        .as_ref()
        .map(|p| (cpu_of(p.id()), bpf_usage(p.id())));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    let work = read_rounds(&mut out);
    let after_bpf = profiler.as_ref().and_then(|p| bpf_usage(p.id()));
    let usage = profiler.map(stop).transpose();
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    // The profiler is done: the workload may exit.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    let status = workload.wait()?;
    let (rounds, span) = work?;
    ensure!(status.success(), "the Python workload failed: {status}");
    let Some(usage) = usage? else {
        return Ok(Run {
            kind,
            rate: rounds as f64 / span,
            profiler: None,
        });
    };
    ensure!(
        usage.status.success(),
        "{} failed: {} (log in {})",
        kind.name(),
        usage.status,
        stem.with_extension("log").display()
    );
    let (cpu_before, bpf_before) = before.unwrap_or_default();
    let bpf = BpfUsage::between(bpf_before, after_bpf);
    let (samples, complete) = match kind {
        Kind::PySpy | Kind::PySpyNonblocking => {
            pyspy_stacks(&std::fs::read_to_string(stem.with_extension("txt"))?)
        }
        _ => {
            let summary = sonde_summary(&usage.stdout);
            let samples = summary
                .iter()
                .find(|(k, _)| k == "samples_cpu")
                .and_then(|(_, v)| v.parse().ok())
                .context("sonde's summary has no samples: line")?;
            let folded = std::fs::read_to_string(stem.with_extension("folded"))?;
            (samples, sonde_complete(&folded))
        }
    };
    Ok(Run {
        kind,
        rate: rounds as f64 / span,
        profiler: Some(ProfilerCost {
            cpu: usage.cpu.saturating_sub(cpu_before.unwrap_or_default()),
            bpf,
            span,
            max_rss_kib: usage.max_rss_kib,
            samples,
            complete,
        }),
    })
}

/// `python3 py_split.py SECONDS --wait-signal`, once it printed `ready`; its stdout for the result.
fn start_workload(seconds: u64) -> anyhow::Result<(Child, BufReader<ChildStdout>)> {
    let script = root().join("tests/workloads/python/py_split.py");
    let mut child = Command::new(PYTHON)
        .arg(&script)
        .arg(seconds.to_string())
        .arg("--wait-signal")
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {PYTHON} {}", script.display()))?;
    let mut out = BufReader::new(child.stdout.take().context("piped stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        bail!("{PYTHON} {} did not start: {line:?}", script.display());
    }
    Ok((child, out))
}

/// Reads the workload's `rounds N seconds S` line (after its timed work).
fn read_rounds(out: &mut BufReader<ChildStdout>) -> anyhow::Result<(u64, f64)> {
    let mut line = String::new();
    out.read_line(&mut line)?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    if let ["rounds", n, "seconds", s] = fields[..]
        && let (Ok(n), Ok(s)) = (n.parse(), s.parse::<f64>())
        && s > 0.0
    {
        return Ok((n, s));
    }
    bail!("the Python workload printed {line:?}, not `rounds N seconds S`")
}

fn start_sonde(sonde: &Path, pid: u32, kind: Kind, stem: &Path) -> anyhow::Result<Child> {
    let runtimes = if kind == Kind::SondeOn {
        "all"
    } else {
        "go,java,node"
    };
    Command::new(sonde)
        .args([
            "record",
            "--summary-json",
            "-",
            "--duration",
            "86400",
            "--frequency",
            "99",
        ])
        .args([
            "--pid",
            &pid.to_string(),
            "--runtimes",
            runtimes,
            "--output",
        ])
        .arg(stem.with_extension("pb.gz"))
        .arg("--folded")
        .arg(stem.with_extension("folded"))
        .stdout(Stdio::piped())
        .stderr(log_file(stem)?)
        .spawn()
        .with_context(|| format!("starting {}", sonde.display()))
}

fn start_pyspy(pyspy: &Path, pid: u32, stem: &Path, nonblocking: bool) -> anyhow::Result<Child> {
    // SIGINT stops it; it writes its output then.
    Command::new(pyspy)
        .args([
            "record",
            "-r",
            "99",
            "--format",
            "raw",
            "--pid",
            &pid.to_string(),
        ])
        .args(nonblocking.then_some("--nonblocking"))
        .arg("-o")
        .arg(stem.with_extension("txt"))
        .stdout(Stdio::piped())
        .stderr(log_file(stem)?)
        .spawn()
        .with_context(|| format!("starting {}", pyspy.display()))
}

fn log_file(stem: &Path) -> anyhow::Result<std::fs::File> {
    let path: PathBuf = stem.with_extension("log");
    std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))
}

/// Samples and complete Python stacks in sonde's folded lines (`comm;root;...;leaf COUNT`): a stack is
/// complete when it holds `<module>` (only the script's module code calls into the work).
fn sonde_complete(folded: &str) -> u64 {
    folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.split(';').any(|f| f == "<module>"))
        .filter_map(|(_, n)| n.parse::<u64>().ok())
        .sum()
}

/// Samples and complete Python stacks in py-spy's raw lines (`root;...;leaf COUNT`, Python frames
/// `name (file:line)`): complete when the root-most Python frame is the script's `<module>`.
fn pyspy_stacks(raw: &str) -> (u64, u64) {
    let (mut samples, mut complete) = (0, 0);
    for (stack, n) in raw.lines().filter_map(|l| l.rsplit_once(' ')) {
        let Ok(n) = n.parse::<u64>() else { continue };
        samples += n;
        let root_python = stack.split(';').find(|f| {
            f.rsplit_once(" (")
                .and_then(|(_, loc)| loc.strip_suffix(')')?.rsplit_once(':'))
                .is_some_and(|(file, line)| file.ends_with(".py") && line.parse::<u32>().is_ok())
        });
        if root_python.is_some_and(|f| f.starts_with("<module> (") && f.contains("py_split.py:")) {
            complete += n;
        }
    }
    (samples, complete)
}

/// A profiled run's figures (NaN where there is none).
fn figures(run: &Run, p: &ProfilerCost) -> [f64; 8] {
    let cpu_s = p.cpu.as_secs_f64() / p.span;
    let bpf_s = p.bpf.run_ns as f64 / 1e9 / p.span;
    let per = |n: u64| {
        if p.bpf.sampling_runs > 0 && n > 0 {
            p.bpf.sampling_ns as f64 / n as f64
        } else {
            f64::NAN
        }
    };
    let complete = if run.kind == Kind::SondeOff || p.samples == 0 {
        f64::NAN
    } else {
        100.0 * p.complete as f64 / p.samples as f64
    };
    [
        run.rate,
        cpu_s,
        bpf_s,
        p.max_rss_kib as f64 / 1024.0,
        per(p.bpf.sampling_runs),
        per(p.samples),
        p.samples as f64,
        complete,
    ]
}

fn print(runs: &[Run], options: &Options) {
    let rates = |kind: Kind| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.rate)
            .collect()
    };
    let alone = rates(Kind::Alone);
    let base = median(alone.clone()).unwrap_or(f64::NAN);
    println!(
        "\n## Python ({PYTHON}, py_split.py, {} s of work per run, medians of {} rounds, {} CPUs)",
        options.seconds,
        options.rounds,
        cpus()
    );
    let list = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("alone: {base:.1} rounds/s (runs: {})", list(&alone));
    println!(
        "| profiler | rounds/s (runs) | slowdown | profiler CPU s/s | % of machine | peak RSS MiB | BPF ns/sampling run | BPF ns/recorded sample | samples | complete Python stacks |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for kind in [
        Kind::SondeOff,
        Kind::SondeOn,
        Kind::PySpy,
        Kind::PySpyNonblocking,
    ] {
        let rows: Vec<[f64; 8]> = runs
            .iter()
            .filter(|r| r.kind == kind)
            .filter_map(|r| Some(figures(r, r.profiler.as_ref()?)))
            .collect();
        let m: Vec<Option<f64>> = (0..8)
            .map(|i| median(rows.iter().map(|r| r[i]).collect()))
            .collect();
        let show = |v: Option<f64>, digits: usize| {
            v.map(|x| format!("{x:.digits$}"))
                .unwrap_or_else(|| "-".into())
        };
        let (rate, cpu_s, bpf_s) = (
            m[0].unwrap_or(f64::NAN),
            m[1].unwrap_or(0.0),
            m[2].unwrap_or(0.0),
        );
        let complete = match m[7] {
            Some(x) => format!("{x:.1}%"),
            None if kind == Kind::SondeOff => "- (no Python frames)".into(),
            None => "-".into(),
        };
        println!(
            "| {} | {rate:.1} ({}) | {:+.2}% | {cpu_s:.4} (+{bpf_s:.4} BPF) | {:.3}% | {} | {} | {} | {} | {} |",
            kind.name(),
            list(&rates(kind)),
            100.0 * (base / rate - 1.0),
            100.0 * (cpu_s + bpf_s) / cpus() as f64,
            show(m[3], 1),
            show(m[4], 0),
            show(m[5], 0),
            show(m[6], 0),
            complete,
        );
    }
    println!(
        "Slowdown: extra time per unit of work against alone. Profiler CPU: user + system from the start \
         of the timed work to the profiler's exit (its final symbolization included), plus its BPF run \
         time, per second of work. BPF ns/recorded sample charges all sampling runs (the other CPU's \
         too) to the workload's samples: an upper bound of one sample's cost (target with Python \
         frames: <= {TARGET_BPF_NS:.0} ns)."
    );
}

#[cfg(test)]
mod tests {
    use super::{pyspy_stacks, sonde_complete};

    #[test]
    fn complete_stacks_reach_the_scripts_module() {
        let raw = "0x1 (libc.so.6);<module> (py_split.py:61);main (py_split.py:55);burn_fifty (py_split.py:22) 7\n\
                   main (py_split.py:55);burn_fifty (py_split.py:22) 2\n\
                   <module> (other.py:3);f (x.py:1) 1\n";
        assert_eq!(pyspy_stacks(raw), (10, 7));
        let folded =
            "python3;_start;<module>;main;burn_fifty 5\npython3;_start;main;burn_fifty 3\n";
        assert_eq!(sonde_complete(folded), 5);
    }
}
