//! `sonde prune`: one retention pass over a data directory, on demand.

use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;

use super::{RetentionError, apply};
use crate::storage::{DATA_LOCK, DataMode, SafeDir};

/// Arguments of `sonde prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// The data directory `sonde run` writes.
    #[arg(long, value_name = "DIR")]
    pub data: PathBuf,
    /// Config file whose `[retention]` table applies (the defaults otherwise).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Test hook: the hourly tier's "hour", in seconds.
    #[cfg(feature = "test-hooks")]
    #[arg(long, hide = true, value_name = "SECS")]
    pub test_retention_hour_secs: Option<u64>,
}

/// Only the table this command needs; the rest of the file is `sonde run`'s to check.
#[derive(Debug, Default, serde::Deserialize)]
struct RetentionOnly {
    #[serde(default)]
    retention: super::RetentionFile,
    data_mode: Option<DataMode>,
}

/// Runs `sonde prune`.
pub fn run(args: PruneArgs) -> anyhow::Result<ExitCode> {
    let (file, mode) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            let only = toml::from_str::<RetentionOnly>(&text)
                .with_context(|| format!("{}: [retention] is not valid", path.display()))?;
            (only.retention, only.data_mode.unwrap_or_default())
        }
        None => Default::default(),
    };
    let policy = file.policy(test_hook!(args.test_retention_hour_secs))?;
    if !args.data.is_dir() {
        anyhow::bail!(
            "{} is not a directory: --data takes the directory `sonde run` writes",
            args.data.display()
        );
    }
    // The config's data_mode, as `sonde run` would use: hourly files are made like windows.
    let root = SafeDir::open_root(&args.data, mode)?;
    let _lock = root
        .try_lock(DATA_LOCK)?
        .ok_or_else(|| RetentionError::Busy(args.data.clone()))?;
    let now = crate::clock::unix_nanos_now();
    let o = apply::pass(&root, &policy, now)?;
    println!(
        "windows_merged={} hourly_written={} expired={} capped={} capped_bytes={} lines_dropped={} \
         orphans={} merge_failures={} bytes_after={}",
        o.windows_merged,
        o.hourly_written,
        o.expired,
        o.capped,
        o.capped_bytes,
        o.lines_dropped,
        o.orphans,
        o.merge_failures,
        o.bytes_after
    );
    Ok(ExitCode::SUCCESS)
}
