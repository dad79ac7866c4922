//! The four profilers of the unwinding comparison and one recording with each: start the workloads,
//! start the profiler on their pids, let it record for the window, read its BPF run time, stop it
//! with SIGINT, then tally its stacks (for perf, after running `perf script`, whose cost is kept apart).

use std::{
    collections::HashMap,
    fs::File,
    os::unix::process::ExitStatusExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{
    stacks::{self, Share},
    tables,
    workloads::Workloads,
};
use crate::bench::{Usage, bpf_usage, sonde_summary, stop, wait_usage};

/// Time a profiler gets to attach before its window starts. A fixed wait rather than a readiness
/// line: perf prints none, and the lifetime (attach included) is what the CPU share is measured over.
pub(super) const SETTLE: Duration = Duration::from_secs(3);

/// Time the workloads run before the profiler starts, so xz and Python are past their start-up.
const WARM_UP: Duration = Duration::from_secs(1);

/// Sampling frequency of every profiler.
const HZ: &str = "99";

/// Which profiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    SondeTables,
    SondeFp,
    PerfDwarf,
    Bpftrace,
}

impl Kind {
    /// Every profiler, in the order of the first round.
    pub(super) const ALL: [Kind; 4] = [
        Kind::SondeTables,
        Kind::SondeFp,
        Kind::PerfDwarf,
        Kind::Bpftrace,
    ];

    /// The row label.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::SondeTables => "sonde record --unwind tables",
            Kind::SondeFp => "sonde record --unwind fp",
            Kind::PerfDwarf => "perf record -F 99 -p PIDS --call-graph dwarf",
            Kind::Bpftrace => "bpftrace profile:hz:99 ustack (frame pointers)",
        }
    }

    fn file_stem(self) -> &'static str {
        match self {
            Kind::SondeTables => "sonde-tables",
            Kind::SondeFp => "sonde-fp",
            Kind::PerfDwarf => "perf-dwarf",
            Kind::Bpftrace => "bpftrace",
        }
    }

    /// Whether this is one of sonde's rows.
    pub(super) fn is_sonde(self) -> bool {
        matches!(self, Kind::SondeTables | Kind::SondeFp)
    }
}

/// One recording of one profiler.
pub(super) struct Run {
    /// The profiler process: CPU, peak RSS, BPF.
    pub(super) usage: Usage,
    /// From the profiler's start to its exit.
    pub(super) lifetime: Duration,
    /// Per workload slot.
    pub(super) shares: Vec<Share>,
    /// Samples the profiler recorded of the workloads (the denominator of BPF ns per sample).
    pub(super) samples: u64,
    /// sonde's summary (`--summary-json -`) in its order: figure name, value.
    pub(super) summary: Vec<(String, String)>,
    /// `perf script`: what it costs to get perf's stacks out of perf.data.
    pub(super) post: Option<Usage>,
    /// Things the report must mention (workloads that ended early, stderr of perf script).
    pub(super) notes: Vec<String>,
    /// Binaries mapped executable on the node at the end of the window (sonde's rows only: the node
    /// then runs the workloads and the agent).
    pub(super) mapped: Vec<PathBuf>,
}

impl Run {
    /// A value of sonde's summary, as a number (a trailing `%` dropped).
    pub(super) fn summary_value(&self, key: &str) -> Option<f64> {
        let (_, v) = self.summary.iter().find(|(k, _)| k == key)?;
        v.trim_end_matches('%').parse().ok()
    }
}

/// Records `workloads` with `kind` for `window`; files go to `dir` with the round in their names.
pub(super) fn record(
    sonde: &Path,
    kind: Kind,
    workloads: &Workloads,
    window: Duration,
    round: usize,
    dir: &Path,
) -> anyhow::Result<Run> {
    let stem = dir.join(format!("{}-r{round}", kind.file_stem()));
    let path = |ext: &str| PathBuf::from(format!("{}.{ext}", stem.display()));
    let mut running = workloads.start()?;
    std::thread::sleep(WARM_UP);
    let pids = running.pids();
    let mut cmd = command(sonde, kind, &pids, &path);
    // Stale outputs of an earlier bench would be read as this run's (perf would also keep a .old copy).
    for ext in ["data", "data.old", "folded", "pb.gz"] {
        let _ = std::fs::remove_file(path(ext));
    }
    let stderr = File::create(path("stderr"))?;
    let _stats = BpfStats::enable()?;
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", kind.name()));
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            running.stop();
            return Err(e);
        }
    };
    std::thread::sleep(SETTLE + window);
    let exited = running.exited();
    let mapped = if kind.is_sonde() {
        tables::mapped_binaries()
    } else {
        Vec::new()
    };
    let bpf = bpf_usage(child.id());
    // Stop the profiler before the workloads: bpftrace and sonde symbolize at exit and need them alive.
    let usage = stop(child);
    let lifetime = started.elapsed();
    let slots = running.slots();
    running.stop();
    let mut usage = usage?;
    usage.bpf = bpf;
    // perf record re-raises the SIGINT that stopped it once perf.data is written: that is success.
    let stopped_by_us = usage.status.signal() == Some(libc::SIGINT);
    if !usage.status.success() && !stopped_by_us {
        bail!(
            "{} failed ({}); see {}",
            kind.name(),
            usage.status,
            path("stderr").display()
        );
    }
    let mut notes: Vec<String> = exited
        .iter()
        .map(|&i| {
            format!(
                "{}: {} exited before the window ended",
                kind.name(),
                workloads.list[i].label
            )
        })
        .collect();
    let (shares, summary, post) = tally(kind, &usage, workloads, &slots, &path, &mut notes)?;
    let samples = shares.iter().map(|s| s.samples).sum();
    Ok(Run {
        usage,
        lifetime,
        shares,
        samples,
        summary,
        post,
        notes,
        mapped,
    })
}

/// What one profiler gets from its output: per-workload shares, sonde's summary, perf script's cost.
type Tally = (Vec<Share>, Vec<(String, String)>, Option<Usage>);

/// Reads a stopped profiler's stacks from its output (`slots`: workload slot by pid).
fn tally(
    kind: Kind,
    usage: &Usage,
    workloads: &Workloads,
    slots: &HashMap<u32, usize>,
    path: &dyn Fn(&str) -> PathBuf,
    notes: &mut Vec<String>,
) -> anyhow::Result<Tally> {
    let n = workloads.list.len();
    let by_pid = |pid: u32| slots.get(&pid).copied();
    Ok(match kind {
        Kind::SondeTables | Kind::SondeFp => {
            let folded = std::fs::read_to_string(path("folded"))
                .with_context(|| format!("reading {}", path("folded").display()))?;
            let shares = stacks::from_folded(&folded, n, |c| workloads.by_comm(c));
            (shares, sonde_summary(&usage.stdout), None)
        }
        Kind::PerfDwarf => {
            let (text, post) = perf_script(&path("data"), &path("script.stderr"), notes)?;
            (
                stacks::from_perf_script(&text, n, by_pid),
                Vec::new(),
                Some(post),
            )
        }
        Kind::Bpftrace => (
            stacks::from_bpftrace(&usage.stdout, n, by_pid),
            Vec::new(),
            None,
        ),
    })
}

/// The profiler's command line for the workloads `pids`; `path(ext)` names its output files.
fn command(sonde: &Path, kind: Kind, pids: &[u32], path: &dyn Fn(&str) -> PathBuf) -> Command {
    match kind {
        Kind::SondeTables | Kind::SondeFp => {
            let mut c = Command::new(sonde);
            c.args([
                "record",
                "--summary-json",
                "-",
                "--duration",
                "86400",
                "--frequency",
                HZ,
            ]);
            c.args([
                "--unwind",
                if kind == Kind::SondeTables {
                    "tables"
                } else {
                    "fp"
                },
            ]);
            for pid in pids {
                c.arg("--pid").arg(pid.to_string());
            }
            c.arg("--output").arg(path("pb.gz"));
            c.arg("--folded").arg(path("folded"));
            c
        }
        Kind::PerfDwarf => {
            // Per pid, as sonde and bpftrace record: system-wide (`-a`), perf also copied the user
            // stacks of every other process on the machine, a cost the others did not pay.
            let pid_list = pids
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",");
            let mut c = Command::new("perf");
            c.args(["record", "-q", "-F", HZ, "-p", &pid_list]);
            c.args(["--call-graph", "dwarf", "-o"]);
            c.arg(path("data"));
            c
        }
        Kind::Bpftrace => {
            let filter = pids
                .iter()
                .map(|p| format!("pid == {p}"))
                .collect::<Vec<_>>()
                .join(" || ");
            let mut c = Command::new("bpftrace");
            c.arg("-e").arg(format!(
                "profile:hz:{HZ} /{filter}/ {{ @[pid, ustack] = count(); }}"
            ));
            c
        }
    }
}

/// Runs `perf script` over `data`, keeping its stderr (DWARF unwinding complaints) in `stderr_path`.
fn perf_script(
    data: &Path,
    stderr_path: &Path,
    notes: &mut Vec<String>,
) -> anyhow::Result<(String, Usage)> {
    let child = Command::new("perf")
        .args(["script", "--no-inline", "-F", "pid,ip,sym,dso", "-i"])
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(File::create(stderr_path)?)
        .spawn()
        .context("starting perf script")?;
    let mut usage = wait_usage(child)?;
    if !usage.status.success() {
        bail!(
            "perf script failed ({}); see {}",
            usage.status,
            stderr_path.display()
        );
    }
    let stderr = std::fs::read_to_string(stderr_path).unwrap_or_default();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if !lines.is_empty() {
        let mut distinct: Vec<&str> = Vec::new();
        for l in &lines {
            if !distinct.contains(l) && distinct.len() < 3 {
                distinct.push(l);
            }
        }
        notes.push(format!(
            "perf script wrote {} stderr lines ({}), e.g. {:?}",
            lines.len(),
            stderr_path.display(),
            distinct
        ));
    }
    let text = std::mem::take(&mut usage.stdout);
    Ok((text, usage))
}

/// `kernel.bpf_stats_enabled=1` for the duration of one recording, then the previous value again
/// (the accounting itself costs two clock reads per program run, so it is not left on).
struct BpfStats {
    previous: String,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStats {
    fn enable() -> anyhow::Result<Self> {
        let previous = std::fs::read_to_string(BPF_STATS)?.trim().to_owned();
        std::fs::write(BPF_STATS, "1").with_context(|| format!("writing {BPF_STATS}"))?;
        Ok(Self { previous })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS, &self.previous);
    }
}
