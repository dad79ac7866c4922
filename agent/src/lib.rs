//! sonde: an always-on eBPF profiler. The modules follow one sample through the agent:
//! kernel sampler (`bpf`) -> process capture (`process`) -> drain (`sampler`) -> `symbolize` -> `profile`
//! encoders -> `metadata` (tags per process) -> `export` (OTLP or local directory) -> commands (`record`,
//! `run` in `daemon`, configured by `config`); `diff` consumes stored profiles.

pub mod bpf;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod diff;
pub mod export;
#[doc(hidden)]
pub mod fuzzing;
pub mod metadata;
pub mod metrics;
pub mod process;
pub mod profile;
pub(crate) mod python;
pub mod record;
pub mod retention;
pub mod sampler;
pub mod status;
pub mod stop_signal;
pub mod storage;
pub mod symbolize;
pub mod telemetry;
pub mod unwind;
