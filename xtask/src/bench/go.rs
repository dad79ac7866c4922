//! `## Go` of `cargo xtask bench`: the Go split workload (`tests/workloads/go_split`, built stripped
//! with `-ldflags='-s -w'` as Go services ship) profiled over the same span by `sonde record` with Go
//! named from `.gopclntab` (`--runtimes all`), by `sonde record --runtimes none` (ELF symbols only, as
//! before), by `perf record -g` and by Go's own `runtime/pprof` (started by the workload at the same
//! moment), in interleaved rounds; tables show medians over rounds. Reported per profiler: samples
//! of the workload, the share of its user frames that have a name, the profiler's CPU over the span
//! (plus its BPF run time) and peak RSS, and the BPF cost per recorded sample. Go's profiler runs
//! inside the workload: its cost is not separable here, and its frames are named by the runtime.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};

use super::{BpfUsage, bpf_usage, cpu_of, cpus, median, sonde_summary, stop};
use crate::util::root;

/// Seconds the workload runs before every profiler's span starts (sonde loads, perf attaches).
const WARM_UP: u64 = 3;

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    SondeGo,
    SondeNative,
    Perf,
    GoPprof,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::SondeGo, Kind::SondeNative, Kind::Perf, Kind::GoPprof];

    fn name(self) -> &'static str {
        match self {
            Kind::SondeGo => "sonde record -F 99 (--runtimes all)",
            Kind::SondeNative => "sonde record -F 99 --runtimes none",
            Kind::Perf => "perf record -F 99 -g",
            Kind::GoPprof => "runtime/pprof (100 Hz, in process)",
        }
    }

    fn stem(self) -> &'static str {
        match self {
            Kind::SondeGo => "sonde-go",
            Kind::SondeNative => "sonde-native",
            Kind::Perf => "perf",
            Kind::GoPprof => "pprof",
        }
    }
}

/// One profiled run: samples, named user frames / user frames, and the profiler's own cost.
struct Run {
    kind: Kind,
    samples: f64,
    /// Seconds of the workload the profiler covered: sonde and perf run from the workload's start,
    /// Go's profiler from the start of the span.
    covered: f64,
    named_percent: f64,
    /// sonde: samples carrying the goroutine's pprof labels, percent of its samples.
    labelled_percent: Option<f64>,
    cost: Option<Cost>,
}

struct Cost {
    cpu: Duration,
    bpf: BpfUsage,
    max_rss_kib: i64,
    /// sonde: the kernel's median cost of a sample walked by frame pointers (every Go walk, its
    /// labels read), from the summary.
    sample_p50: Option<f64>,
}

/// Runs the section and prints it; files are kept in `dir/go`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds > 0, "--go-seconds must be at least 1");
    ensure!(options.rounds > 0, "--go-rounds must be at least 1");
    let dir = dir.join("go");
    std::fs::create_dir_all(&dir)?;
    let workload = build(&dir)?;
    let runs = super::interleaved(
        "go",
        options.rounds,
        &Kind::ALL,
        Kind::name,
        |round, kind| {
            let stem = dir.join(format!("{}-r{round}", kind.stem()));
            measure(kind, sonde, &workload, &stem, options.seconds)
        },
    )?;
    print(&runs, options);
    Ok(())
}

/// `go build -trimpath -ldflags='-s -w'` of the split workload.
fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    let out = dir.join("go_split");
    let status = Command::new("go")
        .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(&out)
        .arg(root().join("tests/workloads/go_split/main.go"))
        .env("GOCACHE", root().join("target/go-cache"))
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .status()
        .context("running go (Debian's golang-go: cargo xtask setup --peers)")?;
    ensure!(status.success(), "building the Go workload failed");
    Ok(out)
}

fn measure(
    kind: Kind,
    sonde: &Path,
    workload: &Path,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let profile = stem.with_extension("pprof");
    let mut cmd = Command::new(workload);
    cmd.arg((WARM_UP + seconds).to_string());
    if kind == Kind::GoPprof {
        cmd.arg(&profile).arg(WARM_UP.to_string());
    }
    let mut child = cmd.spawn().context("starting the Go workload")?;
    let pid = child.id();
    let profiler = match kind {
        Kind::SondeGo | Kind::SondeNative => Some(start_sonde(sonde, pid, kind, stem)?),
        Kind::Perf => Some(start_perf(pid, stem)?),
        Kind::GoPprof => None,
    };
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    std::thread::sleep(Duration::from_secs(WARM_UP));
    let before = profiler
        .as_ref()
        .map(|p| (cpu_of(p.id()), bpf_usage(p.id())));
    std::thread::sleep(Duration::from_secs(seconds));
    let after_bpf = profiler.as_ref().and_then(|p| bpf_usage(p.id()));
    let usage = profiler.map(stop).transpose()?;
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    let status = child.wait()?;
    ensure!(status.success(), "the Go workload failed: {status}");
    let mut labelled = None;
    let (samples, named_percent, covered) = match kind {
        Kind::SondeGo | Kind::SondeNative => {
            let usage = usage.as_ref().context("sonde ran")?;
            ensure!(
                usage.status.success(),
                "{} failed: {}",
                kind.name(),
                usage.status
            );
            let summary = sonde_summary(&usage.stdout);
            let field = |key: &str| {
                super::summary_number(&summary, key)
                    .with_context(|| format!("sonde's summary has no {key}"))
            };
            let duration = summary
                .iter()
                .find(|(k, _)| k == "window_duration_seconds")
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .context("sonde's summary has no duration_s")?;
            let samples = field("samples_cpu")?;
            labelled = Some(100.0 * field("go_labeled")? / samples.max(1.0));
            (samples, field("symbolized_frame_ratio")?, duration)
        }
        Kind::Perf => {
            let (samples, named) = perf_named(workload, &stem.with_extension("data"))?;
            (samples, named, (WARM_UP + seconds) as f64)
        }
        Kind::GoPprof => (pprof_samples(&profile)?, 100.0, seconds as f64),
    };
    let cost = match (usage, before) {
        (Some(usage), Some((cpu_before, bpf_before))) => Some(Cost {
            cpu: usage.cpu.saturating_sub(cpu_before.unwrap_or_default()),
            bpf: BpfUsage::between(bpf_before, after_bpf),
            max_rss_kib: usage.max_rss_kib,
            // The table path: a Go binary has no `.eh_frame`, so its frames are walked by frame
            // pointer inside the table walk (`fallback_no_info`). The frame-pointer path only holds
            // the odd sample taken before the process was captured (one cold sample read as 31 µs).
            sample_p50: super::summary_number(
                &sonde_summary(&usage.stdout),
                "oncpu_sample_nanoseconds[tables/p50]",
            ),
        }),
        _ => None,
    };
    Ok(Run {
        kind,
        samples,
        covered,
        named_percent,
        labelled_percent: labelled,
        cost,
    })
}

fn start_sonde(sonde: &Path, pid: u32, kind: Kind, stem: &Path) -> anyhow::Result<Child> {
    let runtimes = if kind == Kind::SondeGo { "all" } else { "none" };
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
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", sonde.display()))
}

fn start_perf(pid: u32, stem: &Path) -> anyhow::Result<Child> {
    Command::new("perf")
        .args(["record", "-F", "99", "-g", "-p", &pid.to_string(), "-o"])
        .arg(stem.with_extension("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting perf (linux-perf)")
}

/// Samples of the workload in `data`, and the share of their user frames perf named.
fn perf_named(workload: &Path, data: &Path) -> anyhow::Result<(f64, f64)> {
    let out = Command::new("perf")
        .args(["script", "-F", "comm,ip,sym", "-i"])
        .arg(data)
        .output()
        .context("perf script")?;
    ensure!(
        out.status.success(),
        "perf script failed on {}",
        data.display()
    );
    let comm = workload
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("go_split");
    Ok(named_in_perf_script(
        &String::from_utf8_lossy(&out.stdout),
        comm,
    ))
}

/// From `perf script -F comm,ip,sym` of call-graph samples (a `comm` line, then one indented
/// `ip sym` line per frame): samples of `comm`, and the share of their user frames with a name.
fn named_in_perf_script(text: &str, comm: &str) -> (f64, f64) {
    let (mut samples, mut frames, mut named) = (0u64, 0u64, 0u64);
    let mut mine = false;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if !line.starts_with([' ', '\t']) {
            mine = line.trim() == comm;
            samples += u64::from(mine);
            continue;
        }
        let mut fields = line.split_whitespace();
        let user = fields
            .next()
            .and_then(|ip| u64::from_str_radix(ip, 16).ok())
            .is_some_and(|ip| ip < 0x8000_0000_0000_0000);
        if mine && user {
            frames += 1;
            named += u64::from(fields.next().is_some_and(|sym| sym != "[unknown]"));
        }
    }
    (samples as f64, 100.0 * named as f64 / frames.max(1) as f64)
}

/// Samples in a Go CPU profile (`Total samples = 4.93s` in `go tool pprof -top`, at Go's 100 Hz).
fn pprof_samples(profile: &Path) -> anyhow::Result<f64> {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=1"])
        .arg(profile)
        .env("GOTOOLCHAIN", "local")
        .output()
        .context("go tool pprof")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let total = text
        .split("Total samples = ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .context("no `Total samples` in go tool pprof's output")?;
    let seconds = match total.strip_suffix("ms") {
        Some(ms) => ms.parse::<f64>()? / 1000.0,
        None => total.trim_end_matches('s').parse::<f64>()?,
    };
    Ok(seconds * 100.0)
}

fn print(runs: &[Run], options: &Options) {
    println!(
        "\n## Go (go_split built -ldflags='-s -w', {} s profiled per run, medians of {} rounds, {} CPUs)",
        options.seconds,
        options.rounds,
        cpus()
    );
    println!(
        "| profiler | samples | samples/s covered | named user frames | labelled samples | profiler CPU s/s | peak RSS MiB | BPF ns/recorded sample | BPF ns/Go sample with labels, p50 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let span = options.seconds as f64;
    for kind in Kind::ALL {
        let mine: Vec<&Run> = runs.iter().filter(|r| r.kind == kind).collect();
        let med =
            |f: &dyn Fn(&Run) -> Option<f64>| median(mine.iter().filter_map(|r| f(r)).collect());
        let show = |v: Option<f64>, digits: usize| {
            v.map(|x| format!("{x:.digits$}"))
                .unwrap_or_else(|| "-".into())
        };
        let samples = med(&|r| Some(r.samples));
        let rate = med(&|r| Some(r.samples / r.covered));
        let named = med(&|r| Some(r.named_percent));
        let labelled = med(&|r| r.labelled_percent);
        let cpu = med(&|r| {
            let c = r.cost.as_ref()?;
            Some((c.cpu.as_secs_f64() + c.bpf.run_ns as f64 / 1e9) / span)
        });
        let rss = med(&|r| Some(r.cost.as_ref()?.max_rss_kib as f64 / 1024.0));
        let per_sample = med(&|r| {
            let c = r.cost.as_ref()?;
            (c.bpf.sampling_runs > 0 && r.samples > 0.0)
                .then(|| c.bpf.sampling_ns as f64 / r.samples)
        });
        let go_p50 = med(&|r| r.cost.as_ref()?.sample_p50);
        println!(
            "| {} | {} | {} | {}% | {} | {} | {} | {} | {} |",
            kind.name(),
            show(samples, 0),
            show(rate, 1),
            show(named, 1),
            labelled.map_or("-".into(), |l| format!("{l:.1}%")),
            show(cpu, 4),
            show(rss, 1),
            show(per_sample, 0),
            show(go_p50, 0),
        );
    }
    println!(
        "Samples/s covered: samples over the seconds of the workload each profiler covered (sonde: its \
         duration_s; perf: from the workload's start; Go's profiler: the span). Named user frames: of the workload's user-space frames, those with a function name (Go's \
         profiler names every frame from the runtime's own tables). Labelled samples: sonde's samples \
         carrying the goroutine's pprof labels (`endpoint`), read in the kernel. Profiler CPU: user + system of the \
         profiler process over the profiled span, plus its BPF run time, per second (perf's includes \
         writing perf.data; its symbolization runs after, in `perf script`). BPF ns/recorded sample \
         charges all sampling runs (the other CPUs' too) to the workload's samples."
    );
}

#[cfg(test)]
mod tests {
    use super::named_in_perf_script;

    #[test]
    fn perf_script_frames_are_counted_per_sample_of_the_workload() {
        let text = "go_split \n\t          46a1c0 [unknown]\n\t          46a0f0 [unknown]\n\
                    \tffffffff8100abcd __do_sys_getrusage\n\n\
                    sshd \n\t          55aa00 main\n\n\
                    go_split \n\t          401000 main.main\n\t          46a0f0 [unknown]\n";
        let (samples, named) = named_in_perf_script(text, "go_split");
        assert_eq!(samples, 2.0);
        // Four user frames of go_split, one named; the kernel frame and sshd's do not count.
        assert_eq!(named, 25.0);
    }
}
