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

/// The text of a panic's payload (`panic!("...")` gives a `&str` or a `String`), for the ERROR line
/// that precedes a non-zero exit.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}
