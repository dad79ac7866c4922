//! sonde: an always-on eBPF profiler. The modules follow one sample through the agent:
//! kernel sampler (`bpf`) -> process capture (`process`) -> drain (`sampler`) -> `symbolize` -> `profile`
//! encoders -> commands (`record`).

pub mod bpf;
pub mod cli;
pub mod process;
pub mod profile;
pub mod record;
pub mod sampler;
pub mod stop_signal;
pub mod symbolize;
pub mod telemetry;
