//! `cargo xtask fuzz`: builds the cargo-fuzz targets of `fuzz/` and runs each for a fixed time, starting
//! from its committed seed corpus (`fuzz/corpus/<target>`, real outputs of sonde and of this machine),
//! then prints executions per second and the coverage reached. `cargo xtask test` replays the seeds
//! and mutations of them in sonde's unit tests instead (`fuzzing::replay`).
//!
//! Inputs the fuzzer finds go to `target/fuzz/corpus/<target>`, never into the committed seeds, so a run
//! leaves the tree clean. A crash, a timeout or an out-of-memory input fails the run; the input is kept
//! in `target/fuzz/artifacts/<target>/` and the message gives the command that replays it. Turn it into a
//! unit test beside the parser it broke.

use std::{process::Command, time::Instant};

use anyhow::{Context as _, bail};

use crate::{
    setup,
    util::{cargo, root, run, succeeds},
};

/// The fuzz targets: the names `sonde::fuzzing::target` knows, each with its seeds in `fuzz/corpus/`.
pub const TARGETS: &[&str] = &[
    "pprof",
    "config",
    "cgroup",
    "maps",
    "index_line",
    "perf_map",
    "eh_frame",
    "python_linetable",
    "minidebuginfo",
    "spool_file",
];

const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// The one fuzz binary (`fuzz/fuzz_targets/parsers.rs`); `SONDE_FUZZ_TARGET` picks the parser.
const BINARY: &str = "parsers";

/// Coverage instrumentation without AddressSanitizer: the parsers are safe Rust, so ASan found nothing
/// a panic would not, at a large cost to the instrumented build of the agent and its dependencies.
/// Debug assertions stay on, so arithmetic overflow still fails the run. 16 codegen units instead of
/// cargo-fuzz's 1: the build parallelises, at a small cost in executions per second.
const BUILD_FLAGS: &[&str] = &[
    "--sanitizer",
    "none",
    "--debug-assertions",
    "--codegen-units",
    "16",
];

/// One input may take this long before it counts as a hang.
const INPUT_TIMEOUT_SECS: u32 = 10;
/// Resident memory at which an input counts as a memory bomb (libFuzzer's default, said explicitly).
const RSS_LIMIT_MB: u32 = 2048;

/// Options of `cargo xtask fuzz`.
#[derive(clap::Args)]
pub struct FuzzArgs {
    /// Seconds to run each target.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Run only this target (repeatable); default: all of them.
    #[arg(long = "target", value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(TARGETS))]
    pub targets: Vec<String>,
}

/// What libFuzzer reported for one target.
#[derive(Debug, Default, PartialEq)]
struct Report {
    runs: u64,
    exec_per_sec: u64,
    /// Edges covered (libFuzzer's `cov:`).
    cov: u64,
    /// Coverage features (edges with hit counts, `ft:`).
    features: u64,
    /// Inputs in the corpus at the end (`corp:`).
    corpus: u64,
    peak_rss_mb: u64,
}

/// Installs what fuzzing needs, builds the targets, runs each for `args.seconds` and prints the table.
pub fn run_all(args: &FuzzArgs) -> anyhow::Result<()> {
    tools()?;
    let targets: Vec<&str> = if args.targets.is_empty() {
        TARGETS.to_vec()
    } else {
        args.targets.iter().map(String::as_str).collect()
    };
    seeds_present(&targets)?;
    let started = Instant::now();
    run(cargo_fuzz().arg("build").args(BUILD_FLAGS).arg(BINARY))?;
    eprintln!(
        "xtask: fuzz targets built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let mut reports = Vec::new();
    for target in &targets {
        eprintln!("xtask: fuzzing {target} for {} s", args.seconds);
        reports.push((*target, fuzz_one(target, args.seconds)?));
    }
    println!(
        "{:<12} {:>8} {:>12} {:>10} {:>8} {:>8} {:>8} {:>9}",
        "target", "seconds", "runs", "exec/s", "cov", "ft", "corpus", "rss MB"
    );
    for (target, r) in &reports {
        println!(
            "{:<12} {:>8} {:>12} {:>10} {:>8} {:>8} {:>8} {:>9}",
            target,
            args.seconds,
            r.runs,
            r.exec_per_sec,
            r.cov,
            r.features,
            r.corpus,
            r.peak_rss_mb
        );
    }
    Ok(())
}

/// nightly (sanitizers and coverage instrumentation need it), a C++ compiler (libfuzzer-sys builds
/// libFuzzer), cargo-fuzz, and the eBPF toolchain (the targets link the agent crate, whose build script
/// builds the kernel programs). Each installed only when missing.
fn tools() -> anyhow::Result<()> {
    setup::build_toolchain()?;
    if !succeeds("sh", &["-c", "command -v c++"]) {
        setup::apt_install(&["g++"], "libfuzzer-sys compiles libFuzzer")?;
    }
    let installed = Command::new(cargo())
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_FUZZ_VERSION));
    if !installed {
        eprintln!("xtask: installing cargo-fuzz {CARGO_FUZZ_VERSION}");
        run(Command::new(cargo()).args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            CARGO_FUZZ_VERSION,
        ]))?;
    }
    Ok(())
}

/// `cargo fuzz` on nightly, at the workspace root. Through `rustup run`: the cargo running xtask is the
/// stable toolchain's own binary, which does not understand `+nightly`.
fn cargo_fuzz() -> Command {
    let mut cmd = Command::new("rustup");
    cmd.current_dir(root())
        .args(["run", "nightly", "cargo", "fuzz"])
        // Set by the stable cargo that runs xtask; they would pin the nested build to stable's tools.
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .env_remove("RUSTUP_TOOLCHAIN");
    cmd
}

fn fuzz_one(target: &str, seconds: u64) -> anyhow::Result<Report> {
    let work = root().join("target/fuzz");
    let corpus = work.join("corpus").join(target);
    let artifacts = work.join("artifacts").join(target);
    for dir in [&corpus, &artifacts] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let seeds = root().join("fuzz/corpus").join(target);
    let mut cmd = cargo_fuzz();
    cmd.args(["run"])
        .args(BUILD_FLAGS)
        .arg(BINARY)
        .env("SONDE_FUZZ_TARGET", target)
        // libFuzzer writes new inputs into the first directory only: the committed seeds stay as they are.
        .arg(&corpus)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg("-print_final_stats=1");
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "fuzz target {target} failed ({}):\n{}\n\nThe input is in {} (newest file). Replay it with\n  \
             SONDE_FUZZ_TARGET={target} rustup run nightly cargo fuzz run {} {BINARY} <that file>\nfix the parser and add the input as a \
             unit test beside it.",
            out.status,
            tail.join("\n"),
            artifacts.display(),
            BUILD_FLAGS.join(" ")
        );
    }
    parse_report(&log)
        .with_context(|| format!("no libFuzzer statistics in the output of {target}:\n{log}"))
}

/// Reads the last status line (`#N DONE cov: C ft: F corp: K/S exec/s: E rss: R`) and the final stats.
fn parse_report(log: &str) -> Option<Report> {
    let status = log.lines().rev().find(|l| l.contains(" cov: "))?;
    let field = |name: &str| -> Option<u64> {
        let rest = status.split(name).nth(1)?;
        let word = rest.split_whitespace().next()?;
        let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let stat = |name: &str| -> Option<u64> {
        log.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(Report {
        runs: stat("stat::number_of_executed_units:")?,
        exec_per_sec: stat("stat::average_exec_per_sec:")?,
        cov: field(" cov: ")?,
        features: field(" ft: ").unwrap_or(0),
        corpus: field(" corp: ").unwrap_or(0),
        peak_rss_mb: stat("stat::peak_rss_mb:").unwrap_or(0),
    })
}

/// Fails unless every target has committed seeds (checked before a long build, not after it).
fn seeds_present(targets: &[&str]) -> anyhow::Result<()> {
    for target in targets {
        let dir = root().join("fuzz/corpus").join(target);
        let seeds = std::fs::read_dir(&dir)
            .with_context(|| format!("reading the seeds in {}", dir.display()))?
            .count();
        if seeds == 0 {
            bail!("{} holds no seed input", dir.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_statistics() {
        let log = "\
#2\tINITED cov: 1200 ft: 1500 corp: 9/34Kb exec/s: 0 rss: 60Mb
#65536\tpulse  cov: 1300 ft: 2000 corp: 40/50Kb lim: 4096 exec/s: 21845 rss: 80Mb
#180000\tDONE   cov: 1345 ft: 2400 corp: 61/71Kb lim: 4096 exec/s: 22500 rss: 92Mb
Done 180000 runs in 8 second(s)
stat::number_of_executed_units: 180000
stat::average_exec_per_sec:     22500
stat::new_units_added:          52
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              92
";
        assert_eq!(
            parse_report(log),
            Some(Report {
                runs: 180_000,
                exec_per_sec: 22_500,
                cov: 1345,
                features: 2400,
                corpus: 61,
                peak_rss_mb: 92,
            })
        );
        assert_eq!(parse_report("no statistics"), None);
    }
}
