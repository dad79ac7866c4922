//! sonde: an always-on eBPF profiler. The modules follow one sample through the agent:
//! kernel sampler (`bpf`, loading what `platform::kernel` found the kernel offers) -> process capture
//! (`capture`: the `process` model read, every registered runtime of `runtimes` looking at it, the
//! `unwind` tables built) -> drain (`sampler`) -> `symbolize` -> `profile` encoders -> `metadata`
//! (tags per process) -> `export` (OTLP or local directory) -> commands (`record`, `run` in `daemon`,
//! configured by `config`, which owns every setting); `diff` consumes stored profiles. The layers, and
//! which may import which, are in ARCHITECTURE.md, with the seams: a language runtime is named only
//! under `runtimes` (one `Registration` each, listed in `runtimes::registry`), an architecture only
//! under `platform::arch`, a kernel version only in `platform::kernel` (all checked by
//! `cargo xtask layers`).
#![warn(unreachable_pub)]

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
pub(crate) mod capture;
pub mod cli;
pub(crate) mod clock;
pub mod config;
pub mod daemon;
pub(crate) mod datadir;
pub mod diff;
pub mod export;
pub(crate) mod figures;
#[doc(hidden)]
pub mod fuzzing;
pub mod heap;
pub mod metadata;
pub(crate) mod metrics;
pub mod platform;
pub(crate) mod process;
pub mod profile;
pub(crate) mod ratio;
pub mod record;
pub mod remote;
pub mod retention;
pub(crate) mod runtimes;
pub(crate) mod sampler;
pub mod status;
pub(crate) mod stop_signal;
pub(crate) mod storage;
pub(crate) mod symbolize;
pub mod target_list;
pub(crate) mod targets;
pub mod telemetry;
pub mod unwind;
