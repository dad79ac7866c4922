//! Logging setup: structured `tracing` events to stderr, filter from `--log` or `SONDE_LOG`.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Safe to call once per process.
pub fn init(default_filter: &str) {
    let filter =
        EnvFilter::try_from_env("SONDE_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter));
    use std::io::IsTerminal as _;
    // Colour only for people: logs piped to files or collectors stay plain key=value text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
