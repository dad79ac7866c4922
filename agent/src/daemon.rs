//! `sonde run`: the always-on daemon. MINIMAL PLACEHOLDER: it validates the configuration and stops; the
//! sampling loop (sampler -> symbolize -> `metadata` -> `export`) is wired by the sampler's owner.

use std::process::ExitCode;

use crate::config::{DaemonConfig, RunArgs};

/// Runs `sonde run`. For now: validates the configuration, then fails with "daemon loop not wired yet".
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = DaemonConfig::load(&args)?;
    tracing::info!(
        interval = ?config.export_interval,
        otlp = config.otlp.as_ref().map(|o| o.endpoint.as_str()),
        data_dir = %config.data_dir.display(),
        "configuration valid"
    );
    anyhow::bail!("daemon loop not wired yet")
}
