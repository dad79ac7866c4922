//! `## Java` of `cargo xtask bench`: the Java split workload (`tests/workloads/java/Split.java`,
//! 50/30/20 of its main thread in `burnA`/`burnB`/`burnC`, measured by the workload itself with
//! `System.nanoTime`) on Debian's OpenJDK 17, profiled over the same span, after a JIT warm-up, by
//! `sonde record` without JVM flags (`--runtimes all`), by `sonde record --runtimes none` (what sonde
//! gave before it walked Java frames), by `perf record -g` on a JVM started with
//! `-XX:+PreserveFramePointer` and a perf map written by `jcmd PID Compiler.perfmap` at the end of the
//! span, and by JFR (`jcmd PID JFR.start settings=profile`), in interleaved rounds; tables show medians
//! over rounds.
//!
//! Per profiler: samples of the main thread, the share of them holding a Java method name, the error
//! of its burner shares against the workload's own accounting (the largest of the three differences),
//! the profiler's CPU as a share of the machine (sonde's includes its BPF run time) and peak RSS, and
//! BPF nanoseconds per recorded sample. JFR runs inside the JVM: its cost is not separable here.

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

/// Seconds of JIT warm-up before the span (C2 compiles the burners).
const WARM_UP: u64 = 4;
/// Seconds between a profiler's start and the span (sonde loads its programs and captures the JVM).
const SETTLE: u64 = 2;
/// Debian's OpenJDK 17.
pub(super) const JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64/bin";
/// The burners, in the workload's accounting order.
const BURNERS: [&str; 3] = ["burnA", "burnB", "burnC"];

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    SondeJava,
    SondeNative,
    PerfMap,
    Jfr,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::SondeJava, Kind::SondeNative, Kind::PerfMap, Kind::Jfr];

    fn name(self) -> &'static str {
        match self {
            Kind::SondeJava => "sonde record -F 99, no JVM flags (--runtimes all)",
            Kind::SondeNative => "sonde record -F 99 --runtimes none",
            Kind::PerfMap => "perf record -F 99 -g, -XX:+PreserveFramePointer + Compiler.perfmap",
            Kind::Jfr => "JFR settings=profile (jdk.ExecutionSample, in process)",
        }
    }

    fn stem(self) -> &'static str {
        match self {
            Kind::SondeJava => "sonde-java",
            Kind::SondeNative => "sonde-native",
            Kind::PerfMap => "perf",
            Kind::Jfr => "jfr",
        }
    }
}

/// One profiled run.
struct Run {
    kind: Kind,
    /// Main-thread samples.
    samples: f64,
    /// Of those, the share holding a Java method name, percent.
    named_percent: f64,
    /// Largest |profiler share - accounted share| over the burners, points; None when the profiler
    /// saw no burner.
    error: Option<f64>,
    cost: Option<Cost>,
}

struct Cost {
    cpu: Duration,
    bpf: BpfUsage,
    max_rss_kib: i64,
    /// sonde's own median BPF time of a sample with Java frames, and of one with native frames only
    /// (the process's other threads), ns.
    sample_p50: Option<f64>,
    native_p50: Option<f64>,
}

/// Runs the section and prints it; files are kept in `dir/java`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds > 0, "--java-seconds must be at least 1");
    ensure!(options.rounds > 0, "--java-rounds must be at least 1");
    let dir = dir.join("java");
    std::fs::create_dir_all(&dir)?;
    let classes = compile(&dir)?;
    let runs = super::interleaved(
        "java",
        options.rounds,
        &Kind::ALL,
        Kind::name,
        |round, kind| {
            let stem = dir.join(format!("{}-r{round}", kind.stem()));
            measure(kind, sonde, &classes, &stem, options.seconds)
        },
    )?;
    print(&runs, options);
    Ok(())
}

/// `javac` of the split workload.
pub(super) fn compile(dir: &Path) -> anyhow::Result<PathBuf> {
    let out = dir.join("classes");
    let status = Command::new(format!("{JDK}/javac"))
        .args(["--release", "11", "-g", "-d"])
        .arg(&out)
        .args(["Split.java", "Control.java"].map(|f| root().join("tests/workloads/java").join(f)))
        .status()
        .context("running javac (Debian's openjdk-17-jdk-headless: cargo xtask setup --peers)")?;
    ensure!(status.success(), "compiling the Java workload failed");
    Ok(out)
}

/// The JVM running the workload, and its output after "ready".
struct Jvm {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Jvm {
    fn start(classes: &Path, options: &[&str], seconds: u64) -> anyhow::Result<Self> {
        let mut child = Command::new(format!("{JDK}/java"))
            .args(options)
            .arg("-cp")
            .arg(classes)
            // The accounted part outlasts the span; the JVM ends on its own after it.
            .args([
                "Split",
                &(SETTLE + seconds + 2).to_string(),
                &WARM_UP.to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .context("starting java")?;
        let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
        let mut line = String::new();
        while line.trim() != "ready" {
            line.clear();
            ensure!(
                stdout.read_line(&mut line)? > 0,
                "the Java workload ended before it was ready"
            );
        }
        Ok(Self { child, stdout })
    }

    /// The workload's own shares of the burners (percent), once it ended.
    fn accounted(mut self) -> anyhow::Result<[f64; 3]> {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest)?;
        let status = self.child.wait()?;
        ensure!(status.success(), "the Java workload failed: {status}");
        let line = rest
            .lines()
            .find_map(|l| l.strip_prefix("accounted "))
            .context("the Java workload printed no accounting")?;
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
        Ok([share(BURNERS[0])?, share(BURNERS[1])?, share(BURNERS[2])?])
    }
}

fn measure(
    kind: Kind,
    sonde: &Path,
    classes: &Path,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let jvm_options: &[&str] = match kind {
        Kind::PerfMap => &["-XX:+PreserveFramePointer"],
        _ => &[],
    };
    let jvm = Jvm::start(classes, jvm_options, seconds)?;
    let pid = jvm.child.id();
    let profiler = match kind {
        Kind::SondeJava | Kind::SondeNative => Some(start_sonde(sonde, pid, kind, stem)?),
        Kind::PerfMap => Some(start_perf(pid, stem)?),
        Kind::Jfr => {
            jcmd(pid, &["JFR.start", "name=sonde-bench", "settings=profile"])?;
            None
        }
    };
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    std::thread::sleep(Duration::from_secs(SETTLE));
    let before = profiler
        .as_ref()
        .map(|p| (cpu_of(p.id()), bpf_usage(p.id())));
    std::thread::sleep(Duration::from_secs(seconds));
    let after_bpf = profiler.as_ref().and_then(|p| bpf_usage(p.id()));
    if kind == Kind::PerfMap {
        // A snapshot of the code cache as it is now: the burners were compiled long before.
        jcmd(pid, &["Compiler.perfmap"])?;
    }
    let jfr = stem.with_extension("jfr");
    if kind == Kind::Jfr {
        jcmd(
            pid,
            &[
                "JFR.stop",
                "name=sonde-bench",
                &format!("filename={}", jfr.display()),
            ],
        )?;
    }
    let usage = profiler.map(stop).transpose()?;
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    let accounted = jvm.accounted()?;
    let counts = match kind {
        Kind::SondeJava | Kind::SondeNative => {
            let usage = usage.as_ref().context("sonde ran")?;
            ensure!(
                usage.status.success(),
                "{} failed: {}",
                kind.name(),
                usage.status
            );
            folded_counts(&std::fs::read_to_string(stem.with_extension("folded"))?)
        }
        Kind::PerfMap => perf_counts(&stem.with_extension("data"))?,
        Kind::Jfr => jfr_counts(&jfr)?,
    };
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let cost = match (usage, before) {
        (Some(usage), Some((cpu_before, bpf_before))) => Some(Cost {
            cpu: usage.cpu.saturating_sub(cpu_before.unwrap_or_default()),
            bpf: BpfUsage::between(bpf_before, after_bpf),
            max_rss_kib: usage.max_rss_kib,
            sample_p50: super::sample_cost_p50(&usage.stdout, "java"),
            native_p50: super::sample_cost_p50(&usage.stdout, "tables"),
        }),
        _ => None,
    };
    Ok(Run {
        kind,
        samples: counts.samples,
        named_percent: 100.0 * counts.named / counts.samples.max(1.0),
        error: counts.error(&accounted),
        cost,
    })
}

fn start_sonde(sonde: &Path, pid: u32, kind: Kind, stem: &Path) -> anyhow::Result<Child> {
    let runtimes = if kind == Kind::SondeJava {
        "all"
    } else {
        "none"
    };
    Command::new(sonde)
        .args(["record", "--duration", "86400", "--frequency", "99"])
        .args([
            "--pid",
            &pid.to_string(),
            "--runtimes",
            runtimes,
            "--folded",
        ])
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

fn jcmd(pid: u32, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(format!("{JDK}/jcmd"))
        .arg(pid.to_string())
        .args(args)
        .output()
        .context("running jcmd")?;
    ensure!(
        out.status.success(),
        "jcmd {args:?} failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(())
}

/// What one profiler saw of the main thread.
#[derive(Default, Debug, PartialEq)]
struct Counts {
    samples: f64,
    /// Samples with a Java method name.
    named: f64,
    /// Samples in each burner.
    burners: [f64; 3],
}

impl Counts {
    /// Adds one sample of the main thread whose frames are `frames` (any order).
    fn add<'a>(&mut self, frames: impl Iterator<Item = &'a str> + Clone, weight: f64) {
        self.samples += weight;
        if frames.clone().any(is_java_name) {
            self.named += weight;
        }
        for (i, burner) in BURNERS.iter().enumerate() {
            let name = format!("Split.{burner}");
            if frames.clone().any(|f| f.contains(&name)) {
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

/// A frame naming a Java method: `Split.burnA` as sonde and JFR write it, `long Split.burnA(long)`
/// as HotSpot's perf map does, or a JDK method (`java.lang...`).
fn is_java_name(frame: &str) -> bool {
    frame.contains("Split.") || frame.contains("java.") || frame.contains("jdk.")
}

/// sonde's folded stacks (`comm;root;...;leaf COUNT`): the main thread is `java`.
fn folded_counts(text: &str) -> Counts {
    let mut counts = Counts::default();
    for line in text.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let mut frames = stack.split(';');
        if frames.next() != Some("java") {
            continue;
        }
        counts.add(frames, n.parse().unwrap_or(0.0));
    }
    counts
}

/// `perf script` of `data`: samples of the main thread (`java`, pid = tid), with perf's symbols and
/// the JVM's perf map.
fn perf_counts(data: &Path) -> anyhow::Result<Counts> {
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
    let text = String::from_utf8_lossy(&out.stdout);
    let mut counts = Counts::default();
    let mut frames: Vec<String> = Vec::new();
    let mut mine = false;
    let mut flush = |mine: bool, frames: &mut Vec<String>| {
        if mine {
            counts.add(frames.iter().map(String::as_str), 1.0);
        }
        frames.clear();
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if !line.starts_with([' ', '\t']) {
            flush(mine, &mut frames);
            // `java 12345` (comm, tid); the main Java thread is not the process's first thread, so
            // it is told apart by its name, as in the other rows.
            let mut fields = line.split_whitespace();
            mine = fields.next() == Some("java") && fields.next().is_some();
            continue;
        }
        let sym = line
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ");
        frames.push(sym);
    }
    flush(mine, &mut frames);
    Ok(counts)
}

/// `jfr print --events jdk.ExecutionSample` of `file`: samples of the thread `main`.
fn jfr_counts(file: &Path) -> anyhow::Result<Counts> {
    let out = Command::new(format!("{JDK}/jfr"))
        .args(["print", "--events", "jdk.ExecutionSample"])
        .arg(file)
        .output()
        .context("jfr print")?;
    ensure!(
        out.status.success(),
        "jfr print failed on {}",
        file.display()
    );
    Ok(jfr_text_counts(&String::from_utf8_lossy(&out.stdout)))
}

/// The events of `jfr print`: `sampledThread = "main" ...` then `stackTrace = [` frame lines `]`.
fn jfr_text_counts(text: &str) -> Counts {
    let mut counts = Counts::default();
    let (mut main, mut frames, mut in_stack) = (false, Vec::new(), false);
    for line in text.lines().map(str::trim) {
        if line.starts_with("sampledThread = ") {
            main = line.starts_with("sampledThread = \"main\"");
        } else if line == "stackTrace = [" {
            in_stack = true;
            frames.clear();
        } else if in_stack && line == "]" {
            in_stack = false;
            if main {
                counts.add(frames.iter().copied(), 1.0);
            }
        } else if in_stack {
            frames.push(line);
        }
    }
    counts
}

fn print(runs: &[Run], options: &Options) {
    println!(
        "\n## Java (Split on OpenJDK 17 after {WARM_UP} s of JIT warm-up, {} s profiled per run, medians of {} rounds, {} CPUs)",
        options.seconds,
        options.rounds,
        cpus()
    );
    println!(
        "| profiler | main-thread samples | with a Java name | error vs the workload's accounting | profiler CPU, % of machine | peak RSS MiB | BPF ns/recorded sample | BPF ns/sample with Java frames, p50 | same, over native-only samples |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let span = options.seconds as f64;
    for kind in Kind::ALL {
        let mine: Vec<&Run> = runs.iter().filter(|r| r.kind == kind).collect();
        let med =
            |f: &dyn Fn(&Run) -> Option<f64>| median(mine.iter().filter_map(|r| f(r)).collect());
        let show = |v: Option<f64>, digits: usize, unit: &str| {
            v.map(|x| format!("{x:.digits$}{unit}"))
                .unwrap_or_else(|| "-".into())
        };
        let cpu = med(&|r| {
            let c = r.cost.as_ref()?;
            Some(100.0 * (c.cpu.as_secs_f64() + c.bpf.run_ns as f64 / 1e9) / span / cpus() as f64)
        });
        let per_sample = med(&|r| {
            let c = r.cost.as_ref()?;
            (c.bpf.sampling_runs > 0 && r.samples > 0.0)
                .then(|| c.bpf.sampling_ns as f64 / r.samples)
        });
        let own = med(&|r| r.cost.as_ref()?.sample_p50);
        let ratio = med(&|r| {
            let c = r.cost.as_ref()?;
            Some(c.sample_p50? / c.native_p50?)
        });
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            show(med(&|r| Some(r.samples)), 0, ""),
            show(med(&|r| Some(r.named_percent)), 1, "%"),
            show(med(&|r| r.error), 1, " points"),
            show(cpu, 3, "%"),
            show(
                med(&|r| Some(r.cost.as_ref()?.max_rss_kib as f64 / 1024.0)),
                1,
                ""
            ),
            show(per_sample, 0, ""),
            show(own, 0, ""),
            show(ratio, 2, "x"),
        );
    }
    println!(
        "Main-thread samples: of the thread running `Split.main` (sonde and perf: the thread named \
         `java`; JFR: `main`). With a Java name: samples holding a frame named as a Java method. Error: \
         the largest difference between a profiler's share of burnA/burnB/burnC (of the samples in a \
         burner) and the workload's own System.nanoTime accounting of the same run. Profiler CPU: user + \
         system of the profiler process over the span, plus its BPF run time, as a share of all CPUs. \
         BPF ns/recorded sample charges all sampling runs (the other CPUs' too) to the main thread's \
         samples. BPF ns/sample with Java frames: sonde's own timing of its on-CPU program, the median \
         of the samples whose walk stored Java frames (`oncpu_sample_nanoseconds[java/p50]`); over \
         native-only samples: that median over the median of the same JVM's samples walked with \
         native tables only (its GC and compiler threads), the cost of Java frames on this host's \
         own scale. perf's map is a snapshot taken at the end of the span; JFR's cost is inside the JVM."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_and_jfr_samples_are_counted_per_burner() {
        let folded = "java;clone3;Split.main;Split.round;Split.burnA;Split.step 3\n\
                      java;clone3;Split.main;Split.round;Split.burnB 1\n\
                      java;clone3;start_thread;[jit]+0x10 1\n\
                      C2 CompilerThre;clone3;start_thread 5\n";
        let c = folded_counts(folded);
        assert_eq!((c.samples, c.named, c.burners), (5.0, 4.0, [3.0, 1.0, 0.0]));
        let err = c.error(&[75.0, 25.0, 0.0]).unwrap();
        assert!(err.abs() < 1e-9, "{err}");

        let jfr = "jdk.ExecutionSample {\n  sampledThread = \"main\" (javaThreadId = 1)\n  stackTrace = [\n    Split.burnC(long) line: 40\n    Split.main(String[]) line: 76\n  ]\n}\n\
                   jdk.ExecutionSample {\n  sampledThread = \"C1 thread\" (javaThreadId = 9)\n  stackTrace = [\n    Split.burnA(long) line: 22\n  ]\n}\n";
        let c = jfr_text_counts(jfr);
        assert_eq!((c.samples, c.named, c.burners), (1.0, 1.0, [0.0, 0.0, 1.0]));
    }
}
