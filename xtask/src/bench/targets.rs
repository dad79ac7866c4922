//! `## Targets` of `cargo xtask bench` (`--targets-only`): what a process the relabel rules drop
//! costs the kernel per sample, against a process the `--pid` filter leaves out (both are one hash
//! lookup before any stack is taken) and against one that is walked. Two busy processes (cpu_split
//! with frame pointers, one per CPU, both named `tgt_busy`) run alone; sonde samples the host three
//! ways, in interleaved rounds: `sonde run` with a rule dropping `tgt_busy`, `sonde record --pid` of an
//! idle process (the filter), and `sonde run` with no rule (walked). The figure is the perf-event
//! programs' mean run time per invocation (`bpf_stats`), read over an interval after a warm-up (the
//! rules decide at a process's first sample, whose walk the warm-up leaves out).

use std::{
    fs::File,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};

use super::{BpfUsage, bpf_usage, compile, interleaved, median, stop};
use crate::util::root;

/// The rule that drops the busy processes.
const DROP_RULE: &str = r#"[[relabel]]
source_labels = ["__meta_process_comm"]
regex = "tgt_busy"
action = "drop"
"#;
/// Before the measured interval: the agent attaches, captures and decides.
const WARM_UP: Duration = Duration::from_secs(6);
/// Target: a dropped process's sample costs at most this many times a filtered one.
const TARGET_RATIO: f64 = 1.25;

/// How sonde samples the host in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `sonde run` with the rule dropping the busy processes.
    Dropped,
    /// `sonde record --pid` of an idle process: the busy ones are filtered.
    Filtered,
    /// `sonde run` without rules: the busy ones are walked.
    Walked,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Dropped => "dropped by a relabel rule",
            Mode::Filtered => "filtered by --pid",
            Mode::Walked => "walked (no rule)",
        }
    }
}

/// Runs the section and prints it; files are kept in `dir/targets`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &super::Rounds) -> anyhow::Result<()> {
    let (seconds, rounds) = (options.seconds, options.rounds);
    let dir = dir.join("targets");
    std::fs::create_dir_all(&dir)?;
    let program = compile(
        &root().join("tests/workloads/cpu_split.c"),
        &dir.join("tgt_busy"),
    )?;
    let rules = dir.join("drop.toml");
    std::fs::write(&rules, DROP_RULE)?;
    let modes = [Mode::Dropped, Mode::Filtered, Mode::Walked];
    let per_run = interleaved("targets", rounds, &modes, Mode::name, |_, mode| {
        Ok((mode, measure(sonde, &dir, &program, &rules, mode, seconds)?))
    })?;
    println!(
        "\n## Targets: a dropped process's per-sample kernel cost ({} CPUs, 99 Hz, {rounds} rounds of {seconds} s)",
        super::cpus()
    );
    println!(
        "| how the busy processes are sampled | ns per on-CPU program run (median) | runs per second |"
    );
    println!("|---|---|---|");
    let mut medians = Vec::new();
    for mode in modes {
        let runs: Vec<&BpfUsage> = per_run
            .iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, u)| u)
            .collect();
        let ns = median(
            runs.iter()
                .map(|u| u.sampling_ns as f64 / u.sampling_runs.max(1) as f64)
                .collect(),
        )
        .unwrap_or(0.0);
        let rate = median(
            runs.iter()
                .map(|u| u.sampling_runs as f64 / seconds as f64)
                .collect(),
        )
        .unwrap_or(0.0);
        println!("| {} | {ns:.0} | {rate:.0} |", mode.name());
        medians.push(ns);
    }
    let ratio = medians[0] / medians[1].max(1.0);
    println!(
        "- a dropped process's sample costs <= {TARGET_RATIO}x a filtered one: {} ({ratio:.2}x; a walked one {:.1}x)",
        if ratio <= TARGET_RATIO { "yes" } else { "NO" },
        medians[2] / medians[1].max(1.0),
    );
    Ok(())
}

/// One run of `mode`: the busy processes, sonde, and the perf-event programs' usage over `seconds`
/// after the warm-up.
fn measure(
    sonde: &Path,
    dir: &Path,
    program: &Path,
    rules: &Path,
    mode: Mode,
    seconds: u64,
) -> anyhow::Result<BpfUsage> {
    let lifetime = (WARM_UP.as_secs() + seconds + 30).to_string();
    let busy = Procs(
        (0..super::cpus())
            .map(|_| Command::new(program).arg(&lifetime).spawn())
            .collect::<Result<_, _>>()
            .context("starting the busy processes")?,
    );
    let idle = Procs(vec![
        Command::new("sleep")
            .arg(&lifetime)
            .spawn()
            .context("starting sleep")?,
    ]);
    let data = dir.join("data");
    let _ = std::fs::remove_dir_all(&data);
    let mut cmd = Command::new(sonde);
    match mode {
        Mode::Dropped | Mode::Walked => {
            cmd.args(["run", "--duration", &lifetime, "--data-dir"])
                .arg(&data);
            if mode == Mode::Dropped {
                cmd.arg("--config").arg(rules);
            }
        }
        Mode::Filtered => {
            cmd.args(["record", "--duration", &lifetime, "--pid"])
                .arg(idle.0[0].id().to_string())
                .arg("--output")
                .arg(dir.join("filtered.pb.gz"));
        }
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(File::create(dir.join("sonde.stderr"))?)
        .spawn()
        .context("starting sonde")?;
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    std::thread::sleep(WARM_UP);
    let before = bpf_usage(child.id());
    std::thread::sleep(Duration::from_secs(seconds));
    let after = bpf_usage(child.id());
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    let usage = stop(child)?;
    drop(busy);
    drop(idle);
    ensure!(
        usage.status.success(),
        "sonde ({}) failed: {}; see {}",
        mode.name(),
        usage.status,
        dir.join("sonde.stderr").display()
    );
    let used = BpfUsage::between(before, after);
    ensure!(
        used.sampling_runs > 0,
        "no on-CPU program ran while sonde ({}) sampled",
        mode.name()
    );
    Ok(used)
}

/// Processes killed and reaped when dropped.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
