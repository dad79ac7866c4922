//! `## Unwinding` of `cargo xtask bench`: how many user stacks reach a thread root without frame
//! pointers, and at what cost, for sonde's unwind tables, sonde's frame-pointer walk, `perf record
//! --call-graph dwarf` and bpftrace `ustack` (frame pointers only), each recording the same four
//! concurrent workloads in one run, in interleaved rounds; then the unwind tables' memory and build
//! time for named binaries, for the 200 largest binaries of this system and for this node as it runs.

mod profilers;
mod report;
pub(crate) mod stacks;
mod tables;
mod workloads;

use std::{path::Path, time::Duration};

use anyhow::ensure;

use self::{
    profilers::{Kind, Run},
    workloads::Workloads,
};

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) struct Options {
    /// Window each profiler records.
    pub(crate) window: Duration,
    /// Rounds over all profilers; per-recording numbers are medians over them.
    pub(crate) rounds: usize,
}

/// Every recording of one profiler.
struct Runs {
    kind: Kind,
    runs: Vec<Run>,
    /// Recordings that failed, with why: reported, and the other profilers still run.
    failures: Vec<String>,
}

/// Runs the comparison and prints its section; files are kept in `dir/unwind`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.rounds > 0, "--unwind-rounds must be at least 1");
    let dir = dir.join("unwind");
    std::fs::create_dir_all(&dir)?;
    let workloads = Workloads::prepare(&dir)?;
    let mut all: Vec<Runs> = Kind::ALL
        .iter()
        .map(|&kind| Runs {
            kind,
            runs: Vec::new(),
            failures: Vec::new(),
        })
        .collect();
    for round in 0..options.rounds {
        // Odd rounds go backwards, so no profiler is always the first (or last) of a round.
        let mut order: Vec<usize> = (0..all.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let kind = all[i].kind;
            eprintln!("unwinding bench: round {round}, {}", kind.name());
            match profilers::record(sonde, kind, &workloads, options.window, round, &dir) {
                Ok(run) => all[i].runs.push(run),
                Err(e) => all[i].failures.push(format!("round {round}: {e:#}")),
            }
        }
    }
    eprintln!("unwinding bench: unwind tables");
    // The node is busiest while a recording runs; without any, it is measured as it is now.
    let busy = all
        .iter()
        .filter(|r| r.kind == Kind::SondeTables)
        .flat_map(|r| r.runs.first())
        .map(|run| run.mapped.clone())
        .next()
        .unwrap_or_else(tables::mapped_binaries);
    let tables = tables::measure(sonde, &busy)?;
    report::print(&workloads, &all, &tables, options, &dir);
    Ok(())
}
