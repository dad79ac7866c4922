//! `## Trace context` of `cargo xtask bench` (`--trace-context-only`): what reading the span of each
//! sample costs. `tests/workloads/python/traced_spans.py` runs two operations in spans of their own
//! under Datadog's ddtrace 4.16.0 (from the test peers' environment), which publishes the
//! OpenTelemetry thread context; sonde records it by pid with every runtime on, and with the thread
//! context off (`--runtimes python,go,java,node`), in interleaved rounds. Reported: the BPF time of a
//! sample with Python frames (sonde's own timing, p50 and p90 of the Python path), the samples read
//! in spans, and the profile's size (gzipped pprof, every span's ids as labels) per second recorded.
//! No peer reads the OTEP's context yet (the OpenTelemetry eBPF profiler's reader is an open pull
//! request), so the comparison is sonde against itself.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};

use super::{cpus, interleaved, median};
use crate::util::root;

/// The budget for the reader, ns per sample at the median.
const TARGET_EXTRA_NS: f64 = 500.0;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Off,
    On,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Off => "sonde record --runtimes python,go,java,node (no thread context)",
            Kind::On => "sonde record --runtimes all (thread context read)",
        }
    }

    fn runtimes(self) -> &'static str {
        match self {
            Kind::Off => "python,go,java,node",
            Kind::On => "all",
        }
    }
}

struct Run {
    kind: Kind,
    p50: f64,
    p90: f64,
    labelled: f64,
    samples: f64,
    bytes_per_second: f64,
}

/// Runs the section and prints it; files are kept in `dir/trace_context`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &super::Rounds) -> anyhow::Result<()> {
    let dir = dir.join("trace_context");
    std::fs::create_dir_all(&dir)?;
    let python = crate::setup::peers_python();
    ensure!(
        python.exists(),
        "{} is missing: run `cargo xtask setup --peers`",
        python.display()
    );
    let kinds = [Kind::Off, Kind::On];
    let runs = interleaved(
        "trace context",
        options.rounds,
        &kinds,
        Kind::name,
        |round, kind| measure(sonde, &python, &dir, round, kind, options.seconds),
    )?;
    println!(
        "\n## Trace context: the span of each sample ({} CPUs, 99 Hz, {} rounds of {} s, ddtrace 4.16.0, medians)",
        cpus(),
        options.rounds,
        options.seconds
    );
    println!(
        "| profiler | BPF ns per Python sample, p50 | p90 | samples in spans | profile bytes per second |"
    );
    println!("|---|---|---|---|---|");
    let mut p50s = Vec::new();
    for kind in kinds {
        let of = |f: fn(&Run) -> f64| {
            median(runs.iter().filter(|r| r.kind == kind).map(f).collect()).unwrap_or(f64::NAN)
        };
        let (p50, p90) = (of(|r| r.p50), of(|r| r.p90));
        let share = of(|r| 100.0 * r.labelled / r.samples.max(1.0));
        println!(
            "| {} | {p50:.0} | {p90:.0} | {share:.1}% | {:.0} |",
            kind.name(),
            of(|r| r.bytes_per_second)
        );
        p50s.push(p50);
    }
    let extra = p50s[1] - p50s[0];
    println!(
        "\nThe reader adds {extra:.0} ns per sample at the median (target: at most {TARGET_EXTRA_NS:.0}): {}.",
        if extra <= TARGET_EXTRA_NS {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}

fn measure(
    sonde: &Path,
    python: &Path,
    dir: &Path,
    round: usize,
    kind: Kind,
    seconds: u64,
) -> anyhow::Result<Run> {
    let mut workload = Command::new(python)
        .arg(root().join("tests/workloads/python/traced_spans.py"))
        .arg((seconds + 8).to_string())
        .env("DD_TRACE_AGENT_URL", "http://127.0.0.1:9")
        .env("DD_INSTRUMENTATION_TELEMETRY_ENABLED", "false")
        .env("DD_REMOTE_CONFIGURATION_ENABLED", "false")
        .env("DD_TRACE_STARTUP_LOGS", "false")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting traced_spans.py")?;
    // ddtrace's import takes about a second; its spans start after it.
    std::thread::sleep(Duration::from_secs(3));
    let out = dir.join(format!("{}-r{round}.pb.gz", kind.runtimes()));
    let pid = workload.id().to_string();
    let seconds_arg = seconds.to_string();
    let record = Command::new(sonde)
        .args(["record", "--duration", &seconds_arg, "--pid", &pid])
        .args(["--runtimes", kind.runtimes(), "--output"])
        .arg(&out)
        .args(["--summary-json", "-"])
        .env("SONDE_LOG", "warn")
        .output()
        .context("running sonde record")?;
    let _ = workload.kill();
    let _ = workload.wait();
    ensure!(
        record.status.success(),
        "sonde record failed: {}",
        String::from_utf8_lossy(&record.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&record.stdout)
        .context("sonde record's --summary-json is not JSON")?;
    let figures = &json["figures"];
    let cost = &figures["oncpu_sample_nanoseconds"];
    let number = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    Ok(Run {
        kind,
        p50: number(&cost["python/p50"]),
        p90: number(&cost["python/p90"]),
        labelled: number(&figures["trace_context_labeled"]),
        samples: number(&figures["oncpu_samples"]),
        bytes_per_second: std::fs::metadata(&out)?.len() as f64 / seconds as f64,
    })
}
