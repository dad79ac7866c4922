//! Command-line interface: one subcommand per job, each with its own argument struct.

use clap::{Parser, Subcommand};

/// sonde: always-on eBPF profiler.
#[derive(Debug, Parser)]
#[command(name = "sonde", version, about)]
pub struct Cli {
    /// Log filter (tracing `EnvFilter` syntax); `SONDE_LOG` overrides it.
    #[arg(long, global = true, default_value = "info")]
    pub log: String,
    /// The job to run.
    #[command(subcommand)]
    pub command: Command,
}

/// sonde's jobs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Profile processes for a fixed duration and write one gzip pprof.
    Record(crate::record::RecordArgs),
    /// Profile continuously and export each window (OTLP, or gzip pprof files in a local directory).
    /// Boxed: the largest arguments by far, and every other command would carry their size.
    Run(Box<crate::config::RunArgs>),
    /// Print a running agent's signal table (overhead, coverage, loss, lag) with verdicts.
    Status(crate::status::StatusArgs),
    /// List a running agent's targets: discovery labels, final labels, frequency, kept or dropped.
    Targets(crate::target_list::TargetsArgs),
    /// Apply the retention tiers to a local data directory once (the daemon does it by itself).
    Prune(crate::retention::command::PruneArgs),
    /// Compare two profiles: normalise, subtract and rank functions by change (no BPF needed).
    Diff(crate::diff::DiffArgs),
    /// Build the unwind tables of binaries and print their size and build time (diagnostics).
    #[command(hide = true)]
    UnwindTable(crate::unwind::inspect::InspectArgs),
}
