//! `## Ruby` and `## PHP` of `cargo xtask bench`: the interpreters whose frames sonde appends after
//! the native ones, as Debian 12 ships them, each running its split workload (three functions at
//! 50/30/20% of its CPU, `tests/workloads/<lang>/split.*`), recorded for the same span at 99 Hz by
//! `sonde record` with the runtime off and on, by the language's own sampling profiler where it has
//! one (rbspy, a crates.io crate reading the process from outside, as sonde's userspace does not: it
//! walks in the kernel) and by `perf record -g` with the interpreter's perf map where it has one
//! (PHP's JIT writes one with `opcache.jit_debug`; Ruby 3.1 has none: `--yjit-perf` came with 3.2's
//! YJIT, so perf names its VM's C frames only), in interleaved rounds. Reported per profiler:
//! samples, the share naming one of the three functions, the profiler's CPU, and for sonde the BPF
//! time per recorded sample (the target: 6 µs at the median) with the kernel's own p50/p90 on
//! the language's path.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, bail, ensure};

use super::{cpus, median, sonde_summary, summary_number, wait_usage};
use crate::util::root;

/// The budget for the BPF cost of a sample with the language's frames, ns (median).
const TARGET_BPF_NS: f64 = 6000.0;

/// One interpreter's section.
pub(crate) struct Lang {
    /// Its section's title, and its name in sonde (`--runtimes`, the cost path, the summary).
    title: &'static str,
    runtime: &'static str,
    /// The interpreter profiled: the distribution's own.
    binary: &'static str,
    /// Its workload, from the repository's root.
    script: &'static str,
    /// The workload's functions whose names the table counts.
    functions: [&'static str; 3],
    /// Whether rbspy profiles it.
    rbspy: bool,
    /// The interpreter's arguments that turn its JIT on, for a sonde row with it (none: no row).
    jit_args: &'static [&'static str],
    /// The interpreter's arguments under perf (its perf map), and what the row says of it.
    perf_args: &'static [&'static str],
    perf_note: &'static str,
}

/// Debian 12's CRuby (stripped `libruby`).
pub(crate) const RUBY: Lang = Lang {
    title: "Ruby",
    runtime: "ruby",
    binary: "/usr/bin/ruby3.1",
    script: "tests/workloads/ruby/split.rb",
    functions: [
        "Object#burn_a",
        "Split::Burner#burn_b",
        "Split::Burner.burn_c",
    ],
    rbspy: true,
    jit_args: &["--yjit"],
    perf_args: &[],
    perf_note: "no Ruby perf map in 3.1",
};

/// opcache's tracing JIT on.
const PHP_JIT: [&str; 6] = [
    "-d",
    "opcache.enable_cli=1",
    "-d",
    "opcache.jit_buffer_size=64M",
    "-d",
    "opcache.jit=tracing",
];

/// Debian 12's PHP (CLI): under sonde with its JIT off and on, and under perf with it on, whose
/// perf map names the code it compiled (`opcache.jit_debug=0x10`, `ZEND_JIT_DEBUG_PERF`).
pub(crate) const PHP: Lang = Lang {
    title: "PHP",
    runtime: "php",
    binary: "/usr/bin/php8.2",
    script: "tests/workloads/php/split.php",
    functions: ["burn_a", "Burner::burn_b", "burn_c"],
    rbspy: false,
    jit_args: &PHP_JIT,
    perf_args: &[
        PHP_JIT[0],
        PHP_JIT[1],
        PHP_JIT[2],
        PHP_JIT[3],
        PHP_JIT[4],
        PHP_JIT[5],
        "-d",
        "opcache.jit_debug=0x10",
    ],
    perf_note: "the JIT on, with its perf map",
};

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    SondeOff,
    SondeOn,
    SondeJit,
    Rbspy,
    Perf,
}

impl Kind {
    fn name(self, lang: &Lang) -> String {
        match self {
            Kind::SondeOff => format!("sonde record -F 99 --runtimes all but {}", lang.runtime),
            Kind::SondeOn => "sonde record -F 99 --runtimes all".into(),
            Kind::SondeJit => "sonde record -F 99 --runtimes all (the JIT on)".into(),
            Kind::Rbspy => "rbspy record -r 99".into(),
            Kind::Perf => format!("perf record -F 99 -g ({})", lang.perf_note),
        }
    }

    fn stem(self) -> &'static str {
        match self {
            Kind::SondeOff => "sonde-off",
            Kind::SondeOn => "sonde-on",
            Kind::SondeJit => "sonde-jit",
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
    /// sonde's kernel-timed cost on the language's path, p50 and p90, ns.
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

/// The kinds of runs of `lang`'s section, in table order.
fn kinds(lang: &Lang) -> Vec<Kind> {
    let mut kinds = vec![Kind::SondeOff, Kind::SondeOn];
    if !lang.jit_args.is_empty() {
        kinds.push(Kind::SondeJit);
    }
    if lang.rbspy {
        kinds.push(Kind::Rbspy);
    }
    kinds.push(Kind::Perf);
    kinds
}

/// Runs `lang`'s section and prints it; files are kept in `dir/<runtime>`.
pub(crate) fn run(lang: &Lang, sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    let flag = lang.runtime;
    ensure!(options.seconds > 0, "--{flag}-seconds must be at least 1");
    ensure!(options.rounds > 0, "--{flag}-rounds must be at least 1");
    ensure!(
        Path::new(lang.binary).exists(),
        "{} is missing: run `cargo xtask setup --peers`",
        lang.binary
    );
    let dir = dir.join(lang.runtime);
    std::fs::create_dir_all(&dir)?;
    let rbspy = if lang.rbspy { Some(rbspy()?) } else { None };
    let kinds = kinds(lang);
    let name = |kind: Kind| kind.name(lang);
    let runs = super::interleaved(lang.runtime, options.rounds, &kinds, name, |round, kind| {
        let stem = dir.join(format!("{}-r{round}", kind.stem()));
        measure(lang, kind, sonde, rbspy.as_deref(), &stem, options.seconds)
    })?;
    print(lang, &runs, options);
    Ok(())
}

/// Starts the workload, then the profiler for `seconds`, and reads what it recorded.
fn measure(
    lang: &Lang,
    kind: Kind,
    sonde: &Path,
    rbspy: Option<&Path>,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let script = root().join(lang.script);
    let binary = lang.binary;
    let interpreter_args: &[&str] = match kind {
        Kind::Perf => lang.perf_args,
        Kind::SondeJit => lang.jit_args,
        _ => &[],
    };
    // Outlives the profiler: its code stays readable until the profiler is done.
    let mut workload = Command::new(binary)
        .args(interpreter_args)
        .arg(&script)
        .arg((seconds + 8).to_string())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {binary} {}", script.display()))?;
    let mut out = BufReader::new(workload.stdout.take().context("piped stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = workload.kill();
        bail!("{binary} {} did not start: {line:?}", script.display());
    }
    let pid = workload.id().to_string();
    let secs = seconds.to_string();
    let log = std::fs::File::create(stem.with_extension("log"))?;
    let mut cmd = match kind {
        Kind::SondeOff | Kind::SondeOn | Kind::SondeJit => {
            let mut c = Command::new(sonde);
            let runtimes = match kind {
                Kind::SondeOff => all_but(lang.runtime),
                _ => "all".to_owned(),
            };
            c.args(["record", "--summary-json", "-", "--frequency", "99"])
                .args(["--duration", &secs, "--pid", &pid, "--runtimes", &runtimes])
                .arg("--output")
                .arg(stem.with_extension("pb.gz"))
                .arg("--folded")
                .arg(stem.with_extension("folded"));
            c
        }
        Kind::Rbspy => {
            let mut c = Command::new(rbspy.context("rbspy is not installed")?);
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
        kind.name(lang),
        usage.status,
        stem.with_extension("log").display()
    );
    let folded = match kind {
        Kind::Perf => perf_folded(&stem.with_extension("perf.data"))?,
        _ => std::fs::read_to_string(stem.with_extension("folded"))?,
    };
    let (samples, named) = named_share(&folded, &lang.functions);
    // sonde's own accounting (`bpf_stats`): its sampling program's run time over the recording.
    let summary = sonde_summary(&usage.stdout);
    let path = |q: &str| {
        let key = format!("oncpu_sample_nanoseconds[{}/{q}]", lang.runtime);
        summary_number(&summary, &key)
    };
    let path_ns = path("p50").zip(path("p90"));
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

/// Every runtime sonde knows but `runtime`, as `--runtimes` takes them.
fn all_but(runtime: &str) -> String {
    [
        "python",
        "go",
        "java",
        "node",
        "ruby",
        "php",
        "trace-context",
    ]
    .into_iter()
    .filter(|r| *r != runtime)
    .collect::<Vec<_>>()
    .join(",")
}

/// Samples in `folded` stacks, and those naming one of `functions` (sonde writes the name, rbspy
/// `label - file:line`, PHP's perf map `JIT$name`). A Ruby method counts by its qualified name
/// (`Split::Burner#burn_b`, sonde's) or by its bare one (`burn_b`, rbspy's label).
fn named_share(folded: &str, functions: &[&str]) -> (u64, u64) {
    let (mut samples, mut named) = (0, 0);
    for (stack, n) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let Ok(n) = n.parse::<u64>() else { continue };
        samples += n;
        let names = |f: &str| {
            let label = f
                .split(" - ")
                .next()
                .unwrap_or(f)
                .trim_start_matches("JIT$");
            functions
                .iter()
                .any(|&name| name == label || name.rsplit(['#', '.']).next() == Some(label))
        };
        if stack.split(';').any(names) {
            named += n;
        }
    }
    (samples, named)
}

fn print(lang: &Lang, runs: &[Run], options: &Options) {
    println!(
        "\n## {} ({}, {}, {} s recorded per run, medians of {} rounds, {} CPUs)",
        lang.title,
        lang.binary,
        lang.script,
        options.seconds,
        options.rounds,
        cpus()
    );
    println!(
        "| profiler | samples | naming a function | profiler CPU s/s | BPF ns/recorded sample | {} path p50/p90 ns (kernel-timed) |",
        lang.runtime
    );
    println!("|---|---|---|---|---|---|");
    for kind in kinds(lang) {
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
            kind.name(lang),
            show(samples, 0),
            show(named, 1),
            show(cpu, 4),
            show(bpf, 0),
        );
    }
    println!(
        "Naming a function: samples whose stack holds {} by name. Profiler CPU: user + \
         system of the profiler's process over its run (sonde's load and final symbolization included), \
         per second recorded. BPF ns/recorded sample charges the sampling program's run time (sonde's \
         own bpf_stats figure; the other CPU's runs too) to the workload's samples: an upper bound of one \
         sample's cost (target with {} frames: <= {TARGET_BPF_NS:.0} ns at the median, which the \
         kernel-timed column gives).",
        lang.functions.join(", "),
        lang.title
    );
}

#[cfg(test)]
mod tests {
    use super::{PHP, RUBY, all_but, named_share};

    #[test]
    fn named_samples_hold_a_function_by_its_label() {
        let folded = "ruby;main;<main>;Object#main;Object#burn_a;Object#churn 7\n\
                      <main> - split.rb:55;main - split.rb:44;burn_b - split.rb:26 2\n\
                      ruby;<main>;block in Split::Burner.burn_c 4\n\
                      ruby;rb_vm_exec;libruby+0x1 5\n";
        assert_eq!(named_share(folded, &RUBY.functions), (18, 9));
        let perf = "php;execute_ex;JIT$Burner::burn_b;JIT$churn 3\nphp;execute_ex 1\n";
        assert_eq!(named_share(perf, &PHP.functions), (4, 3));
        assert_eq!(all_but("php"), "python,go,java,node,ruby,trace-context");
    }
}
