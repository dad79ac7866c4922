//! `## Ruby` of `cargo xtask bench`: Debian 12's `ruby3.1` (stripped `libruby`) running
//! `tests/workloads/ruby/split.rb` (three pure-Ruby methods at 50/30/20% of its CPU), recorded for the
//! same span at 99 Hz by `sonde record` with Ruby off and on, by rbspy (`rbspy record`, a crates.io
//! crate reading the process from outside, as sonde's userspace does not: it walks in the kernel) and
//! by `perf record -g` (Ruby 3.1 has no perf map: `--yjit-perf` came with 3.2's YJIT, so perf names
//! the VM's C frames only), in interleaved rounds. Reported per profiler: samples, the share naming
//! one of the three methods, the profiler's CPU, and for sonde the BPF time per recorded sample
//! (the target: 6 µs at the median) with the kernel's own p50/p90 on the `ruby` path.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail, ensure};

use super::{cpus, median, sonde_summary, summary_number, wait_usage};
use crate::util::root;

/// The interpreter profiled: the distribution's own.
const RUBY: &str = "/usr/bin/ruby3.1";
/// The budget for the BPF cost of a sample with Ruby frames, ns (median).
const TARGET_BPF_NS: f64 = 6000.0;
/// The workload's methods whose names the table counts.
const METHODS: [&str; 3] = ["burn_a", "burn_b", "burn_c"];

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    SondeOff,
    SondeOn,
    Rbspy,
    Perf,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::SondeOff => "sonde record -F 99 --runtimes python,go,java,node,trace-context",
            Kind::SondeOn => "sonde record -F 99 --runtimes all",
            Kind::Rbspy => "rbspy record -r 99",
            Kind::Perf => "perf record -F 99 -g (no Ruby perf map in 3.1)",
        }
    }

    fn stem(self) -> &'static str {
        match self {
            Kind::SondeOff => "sonde-ruby-off",
            Kind::SondeOn => "sonde-ruby-on",
            Kind::Rbspy => "rbspy",
            Kind::Perf => "perf",
        }
    }
}

/// One run: what the profiler recorded and what it cost.
struct Run {
    kind: Kind,
    samples: u64,
    named: u64,
    cpu: Duration,
    /// sonde's sampling program's run time over the recording, ns.
    bpf_ns: Option<f64>,
    /// sonde's kernel-timed cost on the `ruby` path, p50 and p90, ns.
    path_ns: Option<(f64, f64)>,
}

/// rbspy, installed from crates.io into `target/peers/rbspy` on first use.
fn rbspy() -> anyhow::Result<PathBuf> {
    let root_dir = root().join("target/peers/rbspy");
    let bin = root_dir.join("bin/rbspy");
    if !bin.exists() {
        eprintln!(
            "xtask: installing rbspy from crates.io into {}",
            root_dir.display()
        );
        crate::util::run(
            Command::new(crate::util::cargo())
                .args([
                    "install",
                    "--locked",
                    "rbspy",
                    "--version",
                    "0.41.0",
                    "--root",
                ])
                .arg(&root_dir),
        )?;
    }
    Ok(bin)
}

/// Runs the section and prints it; files are kept in `dir/ruby`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds > 0, "--ruby-seconds must be at least 1");
    ensure!(options.rounds > 0, "--ruby-rounds must be at least 1");
    ensure!(
        Path::new(RUBY).exists(),
        "{RUBY} is missing: run `cargo xtask setup --peers`"
    );
    let dir = dir.join("ruby");
    std::fs::create_dir_all(&dir)?;
    let rbspy = rbspy()?;
    let kinds = [Kind::SondeOff, Kind::SondeOn, Kind::Rbspy, Kind::Perf];
    let runs = super::interleaved("ruby", options.rounds, &kinds, Kind::name, |round, kind| {
        let stem = dir.join(format!("{}-r{round}", kind.stem()));
        measure(kind, sonde, &rbspy, &stem, options.seconds)
    })?;
    print(&runs, options);
    Ok(())
}

/// Starts the workload, then the profiler for `seconds`, and reads what it recorded.
fn measure(
    kind: Kind,
    sonde: &Path,
    rbspy: &Path,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let script = root().join("tests/workloads/ruby/split.rb");
    // Outlives the profiler: its bodies stay readable until the profiler is done.
    let mut workload = Command::new(RUBY)
        .arg(&script)
        .arg((seconds + 8).to_string())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {RUBY} {}", script.display()))?;
    let mut out = BufReader::new(workload.stdout.take().context("piped stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = workload.kill();
        bail!("{RUBY} split.rb did not start: {line:?}");
    }
    let pid = workload.id().to_string();
    let secs = seconds.to_string();
    let log = std::fs::File::create(stem.with_extension("log"))?;
    let mut cmd = match kind {
        Kind::SondeOff | Kind::SondeOn => {
            let mut c = Command::new(sonde);
            let runtimes = match kind {
                Kind::SondeOn => "all",
                _ => "python,go,java,node,trace-context",
            };
            c.args(["record", "--summary-json", "-", "--frequency", "99"])
                .args(["--duration", &secs, "--pid", &pid, "--runtimes", runtimes])
                .arg("--output")
                .arg(stem.with_extension("pb.gz"))
                .arg("--folded")
                .arg(stem.with_extension("folded"));
            c
        }
        Kind::Rbspy => {
            let mut c = Command::new(rbspy);
            c.args(["record", "--rate", "99", "--duration", &secs, "--pid", &pid])
                .args([
                    "--format",
                    "collapsed",
                    "--nonblocking",
                    "--silent",
                    "--file",
                ])
                .arg(stem.with_extension("folded"));
            c
        }
        Kind::Perf => {
            let mut c = Command::new("perf");
            c.args(["record", "-F", "99", "-g", "-p", &pid, "-o"])
                .arg(stem.with_extension("perf.data"))
                .args(["--", "sleep", &secs]);
            c
        }
    };
    let profiler = cmd.stdout(Stdio::piped()).stderr(log).spawn()?;
    let usage = wait_usage(profiler)?;
    let _ = workload.kill();
    let _ = workload.wait();
    ensure!(
        usage.status.success(),
        "{} failed: {} (log in {})",
        kind.name(),
        usage.status,
        stem.with_extension("log").display()
    );
    let folded = match kind {
        Kind::Perf => perf_folded(&stem.with_extension("perf.data"))?,
        _ => std::fs::read_to_string(stem.with_extension("folded"))?,
    };
    let (samples, named) = named_share(&folded);
    // sonde's own accounting (`bpf_stats`): its sampling program's run time over the recording.
    let summary = sonde_summary(&usage.stdout);
    let path_ns = summary_number(&summary, "oncpu_sample_nanoseconds[ruby/p50]").zip(
        summary_number(&summary, "oncpu_sample_nanoseconds[ruby/p90]"),
    );
    let bpf_ns = summary_number(&summary, "bpf_program_run_seconds[sonde_on_cpu]").map(|s| s * 1e9);
    Ok(Run {
        kind,
        samples,
        named,
        cpu: usage.cpu,
        bpf_ns,
        path_ns,
    })
}

/// `perf script` of `data` as folded stacks (root first), one line per sample.
fn perf_folded(data: &Path) -> anyhow::Result<String> {
    let out = Command::new("perf")
        .args(["script", "-F", "ip,sym", "-i"])
        .arg(data)
        .output()?;
    ensure!(out.status.success(), "perf script failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut folded = String::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let frames: Vec<&str> = block
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        let stack: Vec<&str> = frames.into_iter().rev().collect();
        folded.push_str(&format!("{} 1\n", stack.join(";")));
    }
    Ok(folded)
}

/// Samples in `folded` stacks, and those naming one of the workload's methods (sonde writes the
/// label, rbspy `label - file:line`).
fn named_share(folded: &str) -> (u64, u64) {
    let (mut samples, mut named) = (0, 0);
    for (stack, n) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let Ok(n) = n.parse::<u64>() else { continue };
        samples += n;
        let names = |f: &str| {
            let label = f.split(" - ").next().unwrap_or(f);
            METHODS.contains(&label)
        };
        if stack.split(';').any(names) {
            named += n;
        }
    }
    (samples, named)
}

fn print(runs: &[Run], options: &Options) {
    println!(
        "\n## Ruby ({RUBY}, split.rb, {} s recorded per run, medians of {} rounds, {} CPUs)",
        options.seconds,
        options.rounds,
        cpus()
    );
    println!(
        "| profiler | samples | naming a method | profiler CPU s/s | BPF ns/recorded sample | ruby path p50/p90 ns (kernel-timed) |"
    );
    println!("|---|---|---|---|---|---|");
    for kind in [Kind::SondeOff, Kind::SondeOn, Kind::Rbspy, Kind::Perf] {
        let of: Vec<&Run> = runs.iter().filter(|r| r.kind == kind).collect();
        let m = |f: &dyn Fn(&Run) -> f64| median(of.iter().map(|r| f(r)).collect());
        let show = |v: Option<f64>, digits: usize| {
            v.filter(|x| x.is_finite())
                .map(|x| format!("{x:.digits$}"))
                .unwrap_or_else(|| "-".into())
        };
        let samples = m(&|r| r.samples as f64);
        let named = m(&|r| 100.0 * r.named as f64 / r.samples.max(1) as f64);
        let cpu = m(&|r| r.cpu.as_secs_f64() / options.seconds as f64);
        let bpf = m(&|r| r.bpf_ns.map_or(f64::NAN, |ns| ns / r.samples.max(1) as f64));
        let path = match (
            m(&|r| r.path_ns.map_or(f64::NAN, |p| p.0)),
            m(&|r| r.path_ns.map_or(f64::NAN, |p| p.1)),
        ) {
            (Some(p50), Some(p90)) if p50.is_finite() => format!("{p50:.0} / {p90:.0}"),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {}% | {} | {} | {path} |",
            kind.name(),
            show(samples, 0),
            show(named, 1),
            show(cpu, 4),
            show(bpf, 0),
        );
    }
    println!(
        "Naming a method: samples whose stack holds burn_a, burn_b or burn_c by name. Profiler CPU: user + \
         system of the profiler's process over its run (sonde's load and final symbolization included), \
         per second recorded. BPF ns/recorded sample charges the sampling program's run time (sonde's \
         own bpf_stats figure; the other CPU's runs too) to the workload's samples: an upper bound of one \
         sample's cost (target with Ruby frames: <= \
         {TARGET_BPF_NS:.0} ns at the median, which the kernel-timed column gives)."
    );
}

#[cfg(test)]
mod tests {
    use super::named_share;

    #[test]
    fn named_samples_hold_a_method_by_its_label() {
        let folded = "ruby;main;<main>;main;burn_a;churn 7\n\
                      <main> - split.rb:55;main - split.rb:44;burn_b - split.rb:26 2\n\
                      ruby;rb_vm_exec;libruby+0x1 5\n";
        assert_eq!(named_share(folded), (14, 9));
    }
}
