//! `## Node.js` of `cargo xtask bench`: the split workload (`tests/workloads/node/split.js`, 50/30/20
//! of its main thread in `burnA`/`burnB`/`burnC`, measured by the workload itself with
//! `process.hrtime`) on Debian's Node 20, after a JIT warm-up, alone and profiled over the same span
//! by `sonde record` without Node flags, by `perf record -g` on a Node started with
//! `--perf-basic-prof` (the perf map V8 writes as it compiles), and by V8's own profiler
//! (`node --cpu-prof`, a `.cpuprofile` written at exit), in interleaved rounds; the table shows
//! medians over rounds.
//!
//! Per profiler: samples of the main thread, the share of them holding a function of the workload by
//! name, the error of its burner shares against the workload's accounting, the workload's slowdown
//! (its `step` calls per run against the runs alone), the profiler's CPU as a share of the machine
//! (sonde's includes its BPF run time) and peak RSS, and BPF nanoseconds per recorded sample. V8's
//! profiler runs inside Node: its cost shows only as the slowdown.

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};

use super::{BpfUsage, bpf_usage, cpu_of, cpus, median, stop};
use crate::util::root;

/// Seconds of JIT warm-up before the workload's accounted part (TurboFan compiles the burners).
/// Profilers start during it, [`BEFORE_START`] after Node, so the accounted part (the profiled span
/// and one second more) is their steady state: sonde spends about 2 CPU seconds in its first 3 to
/// load and verify its BPF programs, which on a small machine would otherwise slow the workload down
/// for reasons a longer run would not see.
const WARM_UP: u64 = 6;
/// Seconds between Node's start and the profiler's: Node has created its isolate (and mapped its
/// builtins where V8 copies them) long before.
const BEFORE_START: u64 = 1;
/// Debian's Node.js 20.
pub(super) const NODE: &str = "/usr/bin/node";
/// The burners, in the workload's accounting order.
const BURNERS: [&str; 3] = ["burnA", "burnB", "burnC"];
/// The workload's own functions: a sample holding one by name is "named".
const FUNCTIONS: [&str; 6] = ["main", "round", "burnA", "burnB", "burnC", "step"];
/// What the workload names its main thread (tid == pid; `control.ready()`): every thread of Node
/// is called `node`, and sonde's folded stacks carry the thread's name, not its id.
const MAIN_COMM: &str = "node-main";

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Alone,
    Sonde,
    PerfMap,
    CpuProf,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Alone, Kind::Sonde, Kind::PerfMap, Kind::CpuProf];

    fn name(self) -> &'static str {
        match self {
            Kind::Alone => "none (the workload alone)",
            Kind::Sonde => "sonde record -F 99, no Node flags",
            Kind::PerfMap => "perf record -F 99 -g, node --perf-basic-prof",
            Kind::CpuProf => "node --cpu-prof (V8's profiler, in process)",
        }
    }

    fn stem(self) -> &'static str {
        match self {
            Kind::Alone => "alone",
            Kind::Sonde => "sonde",
            Kind::PerfMap => "perf",
            Kind::CpuProf => "cpuprof",
        }
    }
}

/// One run.
struct Run {
    kind: Kind,
    /// Calls of `step` in the workload's accounted part.
    steps: f64,
    counts: Option<Counts>,
    error: Option<f64>,
    cost: Option<Cost>,
}

struct Cost {
    cpu: Duration,
    bpf: BpfUsage,
    max_rss_kib: i64,
    /// sonde's own median BPF time of a sample with JavaScript frames, ns.
    sample_p50: Option<f64>,
}

/// Runs the section and prints it; files are kept in `dir/node`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds > 0, "--node-seconds must be at least 1");
    ensure!(options.rounds > 0, "--node-rounds must be at least 1");
    let dir = dir.join("node");
    std::fs::create_dir_all(&dir)?;
    let runs = super::interleaved(
        "node",
        options.rounds,
        &Kind::ALL,
        Kind::name,
        |round, kind| {
            let stem = dir.join(format!("{}-r{round}", kind.stem()));
            measure(kind, sonde, &stem, options.seconds)
        },
    )?;
    print(&runs, options);
    Ok(())
}

/// Node running the workload, and its output after "ready".
struct Workload {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Workload {
    fn start(options: &[&str], seconds: u64, dir: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(NODE)
            // `--perf-basic-prof` also writes V8's log (`isolate-*-v8.log`) where Node runs.
            .current_dir(dir)
            .args(options)
            .arg(root().join("tests/workloads/node/split.js"))
            // The accounted part outlasts the span; Node ends on its own after it.
            .args([&(seconds + 1).to_string(), &WARM_UP.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .context("starting node (Debian's nodejs: cargo xtask setup --peers)")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        Ok(Self { child, stdout })
    }

    /// Waits for the end of the warm-up.
    fn ready(&mut self) -> anyhow::Result<()> {
        let mut line = String::new();
        while line.trim() != "ready" {
            line.clear();
            ensure!(
                self.stdout.read_line(&mut line)? > 0,
                "the Node workload ended before it was ready"
            );
        }
        Ok(())
    }

    /// The workload's own shares of the burners (percent) and its `step` calls, once it ended.
    fn end(mut self) -> anyhow::Result<([f64; 3], f64)> {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest)?;
        let status = self.child.wait()?;
        ensure!(status.success(), "the Node workload failed: {status}");
        let line = rest
            .lines()
            .find_map(|l| l.strip_prefix("accounted "))
            .context("the Node workload printed no accounting")?;
        let shares: HashMap<&str, f64> = line
            .split_whitespace()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k, v.parse().ok()?))
            })
            .collect();
        let share = |b: &str| {
            shares
                .get(b)
                .copied()
                .context("a burner's share is missing")
        };
        let steps = rest
            .lines()
            .find_map(|l| l.strip_prefix("steps "))
            .and_then(|n| n.trim().parse().ok())
            .context("the Node workload printed no step count")?;
        Ok((
            [share(BURNERS[0])?, share(BURNERS[1])?, share(BURNERS[2])?],
            steps,
        ))
    }
}

fn measure(kind: Kind, sonde: &Path, stem: &Path, seconds: u64) -> anyhow::Result<Run> {
    let cpuprof_dir = stem.with_extension("cpuprof");
    let _ = std::fs::remove_dir_all(&cpuprof_dir);
    let cpuprof_arg = cpuprof_dir.to_string_lossy().into_owned();
    let node_options: Vec<&str> = match kind {
        Kind::PerfMap => vec!["--perf-basic-prof"],
        Kind::CpuProf => vec!["--cpu-prof", "--cpu-prof-dir", &cpuprof_arg],
        Kind::Alone | Kind::Sonde => vec![],
    };
    let mut workload = Workload::start(&node_options, seconds, stem.parent().context("run dir")?)?;
    let pid = workload.child.id();
    std::thread::sleep(Duration::from_secs(BEFORE_START));
    let profiler = match kind {
        Kind::Sonde => Some(start_sonde(sonde, pid, stem)?),
        Kind::PerfMap => Some(start_perf(pid, stem)?),
        Kind::Alone | Kind::CpuProf => None,
    };
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    workload.ready()?;
    let before = profiler
        .as_ref()
        .map(|p| (cpu_of(p.id()), bpf_usage(p.id())));
    std::thread::sleep(Duration::from_secs(seconds));
    let after_bpf = profiler.as_ref().and_then(|p| bpf_usage(p.id()));
    let usage = profiler.map(stop).transpose()?;
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    let (accounted, steps) = workload.end()?;
    let counts = match kind {
        Kind::Alone => None,
        Kind::Sonde => {
            let usage = usage.as_ref().context("sonde ran")?;
            ensure!(usage.status.success(), "sonde failed: {}", usage.status);
            Some(folded_counts(&std::fs::read_to_string(
                stem.with_extension("folded"),
            )?))
        }
        Kind::PerfMap => Some(perf_counts(&stem.with_extension("data"), pid)?),
        Kind::CpuProf => Some(cpuprof_counts(&cpuprof_dir, pid)?),
    };
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let cost = match (usage, before) {
        (Some(usage), Some((cpu_before, bpf_before))) => Some(Cost {
            cpu: usage.cpu.saturating_sub(cpu_before.unwrap_or_default()),
            bpf: BpfUsage::between(bpf_before, after_bpf),
            max_rss_kib: usage.max_rss_kib,
            sample_p50: super::sample_cost_p50(&usage.stdout, "v8"),
        }),
        _ => None,
    };
    Ok(Run {
        kind,
        steps,
        error: counts.as_ref().and_then(|c| c.error(&accounted)),
        counts,
        cost,
    })
}

fn start_sonde(sonde: &Path, pid: u32, stem: &Path) -> anyhow::Result<Child> {
    Command::new(sonde)
        .args(["record", "--duration", "86400", "--frequency", "99"])
        .args(["--pid", &pid.to_string(), "--folded"])
        .arg(stem.with_extension("folded"))
        .arg("--output")
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

/// What one profiler saw of the main thread.
#[derive(Default, Debug, PartialEq)]
struct Counts {
    samples: f64,
    /// Samples holding a function of the workload by name.
    named: f64,
    /// Samples in each burner.
    burners: [f64; 3],
}

impl Counts {
    /// Adds one sample of the main thread whose frames, already reduced to function names, are
    /// `frames` (any order).
    fn add<'a>(&mut self, frames: impl Iterator<Item = &'a str> + Clone, weight: f64) {
        self.samples += weight;
        if frames.clone().any(|f| FUNCTIONS.contains(&f)) {
            self.named += weight;
        }
        for (i, burner) in BURNERS.iter().enumerate() {
            if frames.clone().any(|f| f == *burner) {
                self.burners[i] += weight;
            }
        }
    }

    /// Largest difference (points) between the burners' shares and `accounted`.
    fn error(&self, accounted: &[f64; 3]) -> Option<f64> {
        let all: f64 = self.burners.iter().sum();
        (all > 0.0).then(|| {
            self.burners
                .iter()
                .zip(accounted)
                .map(|(n, want)| (100.0 * n / all - want).abs())
                .fold(0.0, f64::max)
        })
    }
}

/// sonde's folded stacks (`comm;root;...;leaf COUNT`): the main thread is [`MAIN_COMM`], and sonde
/// names JavaScript functions as they are called.
fn folded_counts(text: &str) -> Counts {
    let mut counts = Counts::default();
    for line in text.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let mut frames = stack.split(';');
        if frames.next() != Some(MAIN_COMM) {
            continue;
        }
        counts.add(frames, n.parse().unwrap_or(0.0));
    }
    counts
}

/// The function a perf map entry names: `JS:*burnA /path/split.js:25:15` (Node 20;
/// `LazyCompile:*burnA ...` before), where `*` and `~` say optimized or not.
fn perf_map_function(symbol: &str) -> &str {
    let first = symbol.split_whitespace().next().unwrap_or_default();
    let name = first.split_once(':').map_or(first, |(_, n)| n);
    name.trim_start_matches(['*', '~', '^', '+'])
}

/// `perf script` of `data`: samples of the main thread (tid == `pid`), with perf's symbols and
/// V8's perf map.
fn perf_counts(data: &Path, pid: u32) -> anyhow::Result<Counts> {
    let out = Command::new("perf")
        .args(["script", "-F", "comm,tid,ip,sym", "-i"])
        .arg(data)
        .output()
        .context("perf script")?;
    ensure!(
        out.status.success(),
        "perf script failed on {}",
        data.display()
    );
    Ok(perf_text_counts(&String::from_utf8_lossy(&out.stdout), pid))
}

fn perf_text_counts(text: &str, pid: u32) -> Counts {
    let mut counts = Counts::default();
    let mut frames: Vec<&str> = Vec::new();
    let mut mine = false;
    let main = pid.to_string();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if !line.starts_with([' ', '\t']) {
            if mine {
                counts.add(frames.iter().copied(), 1.0);
            }
            frames.clear();
            // `COMM TID`: the comm may be the renamed one or not, the tid is what tells.
            mine = line.split_whitespace().nth(1) == Some(main.as_str());
            continue;
        }
        let symbol = line.trim().split_once(' ').map_or("", |(_, s)| s);
        frames.push(perf_map_function(symbol));
    }
    if mine {
        counts.add(frames.iter().copied(), 1.0);
    }
    counts
}

/// The main thread's `.cpuprofile` in `dir` (`CPU.DATE.TIME.PID.0.SEQ.cpuprofile`; thread 0 is the
/// main thread): each sample counted with the functions of its node and the nodes above it. V8's
/// profiler samples from the start of the process, warm-up included.
fn cpuprof_counts(dir: &Path, pid: u32) -> anyhow::Result<Counts> {
    let file: PathBuf = std::fs::read_dir(dir)?
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.ends_with(".cpuprofile") && name.contains(&format!(".{pid}.0."))
        })
        .with_context(|| format!("node wrote no main-thread profile in {}", dir.display()))?;
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file)?)
        .with_context(|| format!("reading {}", file.display()))?;
    Ok(cpuprofile_json_counts(&json))
}

fn cpuprofile_json_counts(json: &serde_json::Value) -> Counts {
    let mut name: HashMap<i64, &str> = HashMap::new();
    let mut parent: HashMap<i64, i64> = HashMap::new();
    for node in json["nodes"].as_array().into_iter().flatten() {
        let Some(id) = node["id"].as_i64() else {
            continue;
        };
        name.insert(
            id,
            node["callFrame"]["functionName"]
                .as_str()
                .unwrap_or_default(),
        );
        for child in node["children"].as_array().into_iter().flatten() {
            if let Some(child) = child.as_i64() {
                parent.insert(child, id);
            }
        }
    }
    let stack = |mut id: i64| {
        let mut frames = vec![];
        while let Some(n) = name.get(&id) {
            frames.push(*n);
            let Some(&p) = parent.get(&id) else { break };
            id = p;
        }
        frames
    };
    let mut counts = Counts::default();
    for sample in json["samples"].as_array().into_iter().flatten() {
        if let Some(id) = sample.as_i64() {
            counts.add(stack(id).into_iter(), 1.0);
        }
    }
    counts
}

fn print(runs: &[Run], options: &Options) {
    println!(
        "\n## Node.js (split.js on Node 20 after {WARM_UP} s of JIT warm-up, profilers started {BEFORE_START} s into it, {} s profiled per run, medians of {} rounds, {} CPUs)",
        options.seconds,
        options.rounds,
        cpus()
    );
    println!(
        "| profiler | main-thread samples | with a workload function | error vs the workload's accounting | workload slowdown | profiler CPU, % of machine | peak RSS MiB | BPF ns/recorded sample | BPF ns/run | BPF ns/sample with JavaScript frames, p50 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let span = options.seconds as f64;
    let alone = median(
        runs.iter()
            .filter(|r| r.kind == Kind::Alone)
            .map(|r| r.steps)
            .collect(),
    );
    for kind in Kind::ALL {
        let mine: Vec<&Run> = runs.iter().filter(|r| r.kind == kind).collect();
        let med =
            |f: &dyn Fn(&Run) -> Option<f64>| median(mine.iter().filter_map(|r| f(r)).collect());
        let show = |v: Option<f64>, digits: usize, unit: &str| {
            v.map(|x| format!("{x:.digits$}{unit}"))
                .unwrap_or_else(|| "-".into())
        };
        let slowdown = med(&|r| Some(100.0 * (alone? / r.steps.max(1.0) - 1.0)));
        let cpu = med(&|r| {
            let c = r.cost.as_ref()?;
            Some(100.0 * (c.cpu.as_secs_f64() + c.bpf.run_ns as f64 / 1e9) / span / cpus() as f64)
        });
        let per_sample = med(&|r| {
            let (c, n) = (r.cost.as_ref()?, r.counts.as_ref()?.samples);
            (c.bpf.sampling_runs > 0 && n > 0.0).then(|| c.bpf.sampling_ns as f64 / n)
        });
        let per_run = med(&|r| {
            let c = r.cost.as_ref()?;
            (c.bpf.sampling_runs > 0).then(|| c.bpf.sampling_ns as f64 / c.bpf.sampling_runs as f64)
        });
        let own = med(&|r| r.cost.as_ref()?.sample_p50);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            show(med(&|r| Some(r.counts.as_ref()?.samples)), 0, ""),
            show(
                med(&|r| {
                    let c = r.counts.as_ref()?;
                    Some(100.0 * c.named / c.samples.max(1.0))
                }),
                1,
                "%"
            ),
            show(med(&|r| r.error), 1, " points"),
            show(slowdown, 1, "%"),
            show(cpu, 3, "%"),
            show(
                med(&|r| Some(r.cost.as_ref()?.max_rss_kib as f64 / 1024.0)),
                1,
                ""
            ),
            show(per_sample, 0, ""),
            show(per_run, 0, ""),
            show(own, 0, ""),
        );
    }
    println!(
        "Main-thread samples: of the thread whose tid is the pid (sonde: by the name the workload gives it; \
         V8's profiler: its main-thread .cpuprofile), over each profiler's whole recording: perf's \
         from its start 1 s into the warm-up, sonde's from when its programs are attached (about 3 s \
         later), V8's about every millisecond from Node's start. With a workload function: samples holding main, round, \
         burnA/B/C or step by name (perf: through the perf map, where interpreted frames are \
         InterpreterEntryTrampoline). Error: the largest difference between a profiler's share of \
         burnA/burnB/burnC (of the samples in a burner) and the workload's own process.hrtime \
         accounting of the same run. Slowdown: the workload's step calls alone (median) over its \
         calls in this run (over the span and one second more, after the profiler's start-up), \
         minus one. Profiler CPU: user + system of the profiler process over the \
         span, plus its BPF run time, as a share of all CPUs. BPF ns/recorded sample charges all \
         sampling runs (the other CPUs' too) to the main thread's samples; BPF ns/run is the mean \
         sampling run, many of which end at the process filter. BPF ns/sample with JavaScript \
         frames: sonde's own timing of its on-CPU program, the median of the samples whose walk \
         stored V8 frames (`oncpu_sample_nanoseconds[v8/p50]`). On a machine running other work, \
         the slowdown and the profiler's CPU carry its noise: read them over several rounds."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_perf_and_cpuprofile_samples_are_counted_per_burner() {
        let folded = "node-main;_start;main;round;burnA;step 3\n\
                      node-main;_start;main;round;burnB 1\n\
                      node-main;_start;[v8 builtin] JSEntry 1\n\
                      node;clone3;start_thread 5\n";
        let c = folded_counts(folded);
        assert_eq!((c.samples, c.named, c.burners), (5.0, 4.0, [3.0, 1.0, 0.0]));
        let err = c.error(&[75.0, 25.0, 0.0]).unwrap();
        assert!(err.abs() < 1e-9, "{err}");

        let perf = "node-main 10 \n\t    7fa87a7ca1e4 JS:*burnB /w/split.js:36:15\n\t  14cfd1c Builtins_InterpreterEntryTrampoline\n\n\
                    node 11 \n\t    7fa87a7ca1e4 JS:*burnC /w/split.js:45:15\n\n\
                    node 10 \n\t    7fa87a7ca790 LazyCompile:~burnC /w/split.js:45:15\n";
        let c = perf_text_counts(perf, 10);
        assert_eq!((c.samples, c.named, c.burners), (2.0, 2.0, [0.0, 1.0, 1.0]));

        let json = serde_json::json!({
            "nodes": [
                {"id": 1, "callFrame": {"functionName": "(root)"}, "children": [2, 4]},
                {"id": 2, "callFrame": {"functionName": "main"}, "children": [3]},
                {"id": 3, "callFrame": {"functionName": "burnC"}},
                {"id": 4, "callFrame": {"functionName": "(garbage collector)"}},
            ],
            "samples": [3, 3, 4],
        });
        let c = cpuprofile_json_counts(&json);
        assert_eq!((c.samples, c.named, c.burners), (3.0, 2.0, [0.0, 0.0, 2.0]));
    }
}
