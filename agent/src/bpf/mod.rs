//! The kernel side as seen from userspace: privilege checks, tracefs, loading and attaching the eBPF
//! programs, and reading their maps behind the [`maps::KernelMaps`] trait (so the drain logic is testable
//! without root).

pub(crate) mod batch;
pub mod drain;
pub(crate) mod kernel_log;
pub mod loader;
pub mod maps;
pub mod privileges;
pub mod sampling;
pub mod tracefs;

use std::path::PathBuf;

/// Everything that can go wrong between sonde and the kernel.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The process lacks a capability the programs need.
    #[error(
        "missing capability {capability}: run sonde as root, or grant it CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (e.g. `setcap cap_bpf,cap_perfmon,cap_sys_ptrace,cap_dac_read_search+ep sonde`)"
    )]
    MissingCapability {
        /// Name of the first missing capability.
        capability: &'static str,
    },
    /// tracefs is not mounted and could not be mounted.
    #[error(
        "tracefs is not mounted and mounting it at /sys/kernel/tracing failed ({source}): mount it with `mount -t tracefs nodev /sys/kernel/tracing`"
    )]
    TracefsUnavailable {
        /// Why the mount failed.
        #[source]
        source: std::io::Error,
    },
    /// A tracepoint's format file is missing or lacks a field.
    #[error("tracepoint {tracepoint} is not usable on this kernel: {reason} (read from {path})")]
    TracepointFormat {
        /// `category:name`.
        tracepoint: String,
        /// What is wrong.
        reason: String,
        /// Format file read.
        path: PathBuf,
    },
    /// The kernel rejected loading the eBPF object.
    #[error("loading the eBPF programs failed: {source}")]
    Load {
        /// aya's error.
        #[source]
        source: aya::EbpfError,
    },
    /// A program could not be loaded (verifier) or attached.
    #[error("program {program}: {source}")]
    Program {
        /// Program name.
        program: &'static str,
        /// aya's error, with the verifier log when it is a verification failure.
        #[source]
        source: aya::programs::ProgramError,
    },
    /// A map operation failed.
    #[error("map {map}: {source}")]
    Map {
        /// Map name.
        map: String,
        /// aya's error.
        #[source]
        source: aya::maps::MapError,
    },
    /// Unwind tables are not built for this architecture yet.
    #[error(
        "unwinding with tables is not supported on {arch} yet (only x86_64): run with --unwind fp (complete stacks then need frame pointers)"
    )]
    UnwindUnsupported {
        /// The architecture sonde was built for.
        arch: &'static str,
    },
    /// A whole-array read or write failed.
    #[error("map {map}: batch operation failed ({source}); sonde needs Linux 5.6 or later")]
    Batch {
        /// Map name.
        map: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Listing online CPUs failed.
    #[error("cannot list online CPUs from {0}")]
    OnlineCpus(String),
}
