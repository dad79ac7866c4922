//! sonde: an always-on eBPF profiler. The modules follow one sample through the agent:
//! kernel sampler (`bpf`) -> process capture (`process`) -> drain (`sampler`) -> `symbolize` -> `profile`
//! encoders -> commands (`record`); `diff` consumes stored profiles.

pub mod cli;
pub mod diff;
pub mod profile;
pub mod record;
pub mod telemetry;
