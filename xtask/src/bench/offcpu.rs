//! The off-CPU sections of `cargo xtask bench`: a context-switch storm (`perf bench sched pipe`) with a
//! sleeper beside it whose off-CPU split is known (`offcpu_sleep`: 20 ms in `sleep_twenty`, 10 ms in
//! `sleep_ten`, truly 2:1), recorded system-wide by sonde with its default off-CPU budget, sonde with
//! no budget and an equivalent bpftrace script, in interleaved rounds. Each is judged on its share of
//! the machine, its BPF time per context switch and the error of the split it reports. Then the
//! CPU-bound workload under both sonde budgets, where switches are rare and the budget should cost
//! nothing.

mod profilers;
mod report;
mod split;

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::ensure;

use self::profilers::{Kind, Recording, Sleeper};
use super::{Busy, compile_with, time_workload};
use crate::util::root;

/// Settings of the section (from `cargo xtask bench` flags).
pub(super) struct Options {
    /// Iterations of `perf bench sched pipe`.
    pub(super) pipe_loops: u64,
    /// Interleaved rounds; the tables show medians over them.
    pub(super) rounds: usize,
}

/// Every pipe-benchmark recording of one profiler.
struct Runs {
    kind: Kind,
    /// With the round each was recorded in.
    runs: Vec<(usize, Recording)>,
    /// Recordings that failed, with why: reported, and the other profilers still run.
    failures: Vec<String>,
}

/// Runs both sections and prints them; files are kept in `dir/offcpu`. `alone` is the CPU-bound
/// workload's time without a profiler.
pub(super) fn run(
    sonde: &Path,
    dir: &Path,
    options: &Options,
    busy: &Busy,
    alone: Duration,
) -> anyhow::Result<()> {
    ensure!(options.rounds > 0, "--offcpu-rounds must be at least 1");
    let dir = dir.join("offcpu");
    std::fs::create_dir_all(&dir)?;
    // Frame pointers and -O1 keep sleep_twenty and sleep_ten as real frames that bpftrace's
    // frame-pointer `ustack` can name too, so both profilers are judged on the same stacks.
    let sleeper = compile_with(
        &root().join("tests/workloads/offcpu_sleep.c"),
        &dir.join("offcpu_sleep"),
        &["-O1", "-g", "-fno-omit-frame-pointer"],
    )?;
    let pipe = || {
        let mut c = Command::new("perf");
        c.args([
            "bench",
            "sched",
            "pipe",
            "-l",
            &options.pipe_loops.to_string(),
        ])
        .stdout(Stdio::null());
        c
    };
    let mut all: Vec<Runs> = Kind::ALL
        .iter()
        .map(|&kind| Runs {
            kind,
            runs: Vec::new(),
            failures: Vec::new(),
        })
        .collect();
    // The pipe benchmark without a profiler (the sleeper still beside it), once per round.
    let mut pipe_alone = Vec::new();
    for round in 0..options.rounds {
        // Slot 0 is the run without a profiler. Odd rounds go backwards, so no profiler is always
        // the first (or last) of a round.
        let mut order: Vec<usize> = (0..=all.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for slot in order {
            let Some(runs) = slot.checked_sub(1).map(|i| &mut all[i]) else {
                eprintln!("off-CPU bench: round {round}, pipe alone");
                let _sleeper = Sleeper::start(&sleeper)?;
                pipe_alone.push(time_workload(&mut pipe())?);
                continue;
            };
            eprintln!("off-CPU bench: round {round}, {}", runs.kind.name());
            let stem = dir.join(format!("{}-pipe-r{round}", runs.kind.file_stem()));
            match profilers::record(runs.kind, sonde, Some(&sleeper), &mut pipe(), &stem) {
                Ok(r) => runs.runs.push((round, r)),
                Err(e) => runs.failures.push(format!("round {round}: {e:#}")),
            }
        }
    }
    // The CPU-bound workload under both sonde budgets, with no sleeper: the budget at rest.
    let mut busy_rows = Vec::new();
    for kind in [Kind::SondeDefault, Kind::SondeUnlimited] {
        eprintln!("off-CPU bench: CPU-bound workload, {}", kind.name());
        let stem = dir.join(format!("{}-busy", kind.file_stem()));
        busy_rows.push((
            kind,
            profilers::record(kind, sonde, None, &mut busy.command(), &stem),
        ));
    }
    report::print(options, &pipe_alone, &all, &dir);
    report::busy(&busy_rows, alone);
    Ok(())
}
