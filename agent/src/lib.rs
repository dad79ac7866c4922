//! sonde: an always-on eBPF profiler. The modules follow one sample through the agent:
//! kernel sampler (`bpf`) -> process capture (`process`) -> drain (`sampler`) -> `symbolize` -> `profile`
//! encoders -> `metadata` (tags per process) -> `export` (OTLP or local directory) -> commands (`record`,
//! `run` in `daemon`, configured by `config`); `diff` consumes stored profiles.

/// The value of a test hook (a hidden flag that only builds with the `test-hooks` feature have, as
/// `cargo xtask test` makes them); `None` in every other build, where the flag does not exist.
macro_rules! test_hook {
    ($value:expr) => {{
        #[cfg(feature = "test-hooks")]
        let value = $value;
        #[cfg(not(feature = "test-hooks"))]
        let value = None;
        value
    }};
}

pub mod bpf;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod datadir;
pub mod diff;
pub mod export;
#[doc(hidden)]
pub mod fuzzing;
pub mod metadata;
pub mod metrics;
pub mod process;
pub mod profile;
pub mod ratio;
pub mod record;
pub mod remote;
pub mod retention;
pub(crate) mod runtimes;
pub mod sampler;
pub mod status;
pub mod stop_signal;
pub mod storage;
pub mod symbolize;
pub mod telemetry;
pub mod unwind;
