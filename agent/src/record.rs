//! `sonde record`: profile for a fixed duration, write one gzip pprof, print a summary.

use std::{path::PathBuf, process::ExitCode};

/// Arguments of `sonde record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Seconds to profile.
    #[arg(long)]
    pub duration: u64,
    /// Process to profile (repeatable); all processes when absent.
    #[arg(long = "pid")]
    pub pids: Vec<u32>,
    /// Output file (gzip pprof).
    #[arg(long)]
    pub output: PathBuf,
}

/// Runs `sonde record`.
pub fn run(_args: RecordArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
