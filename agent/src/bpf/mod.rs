//! The kernel side as seen from userspace: privilege checks, tracefs, loading and attaching the eBPF
//! programs, and reading their maps behind the [`maps::KernelMaps`] trait (so the drain logic is testable
//! without root).

pub(crate) mod batch;
pub(crate) mod btf;
pub(crate) mod cost;
pub mod drain;
mod inner_maps;
pub(crate) mod kernel_log;
pub(crate) mod kernel_names;
mod load_globals;
pub mod loader;
pub mod maps;
mod object;
pub mod options;
pub mod privileges;
pub(crate) mod runtime_programs;
pub mod sampling;
pub(crate) mod targets;
pub mod tracefs;
pub(crate) mod unwind_maps;

use std::path::PathBuf;

/// Everything that can go wrong between sonde and the kernel.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The process lacks a capability checked before loading (see [`privileges`]).
    #[error(
        "missing {capability}, needed {why}: run sonde as root, or grant it {all} (deploy/capabilities.txt: the systemd unit's AmbientCapabilities, the DaemonSet's capabilities)"
    )]
    MissingCapability {
        /// Name of the first missing capability.
        capability: &'static str,
        /// What it is needed for.
        why: &'static str,
        /// The whole canonical list, for the message.
        all: String,
    },
    /// The kernel refused a step of loading or attaching for want of a capability.
    #[error("{step} refused ({errno}): sonde needs {needs}{held_anyway}")]
    Refused {
        /// What was refused.
        step: String,
        /// `EPERM` or `EACCES`.
        errno: &'static str,
        /// The capability (or capabilities) that step needs.
        needs: String,
        /// Empty, or why the kernel refused although the capability is held.
        held_anyway: &'static str,
    },
    /// tracefs is not mounted and could not be mounted.
    #[error(
        "tracefs is not mounted (looked for {looked}) and sonde cannot mount it ({reason}): mount it on the host with `mount -t tracefs tracefs /sys/kernel/tracing` (systemd: before sonde starts), or in Kubernetes give the pod the host's /sys/kernel/tracing as a hostPath volume mounted at /sys/kernel/tracing"
    )]
    TracefsUnavailable {
        /// The places looked at.
        looked: String,
        /// Why mounting failed, with the capability it needs when that is the cause.
        reason: String,
    },
    /// tracefs is mounted but this process may not read it.
    #[error(
        "tracefs at {} is mounted but not readable ({io_error}): sonde needs CAP_DAC_READ_SEARCH (tracefs is root-only){held_anyway}", path.display()
    )]
    TracefsDenied {
        /// The tracefs root.
        path: PathBuf,
        /// The refusal.
        io_error: std::io::Error,
        /// Empty, or why the kernel refused although the capability is held.
        held_anyway: &'static str,
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
    /// The kernel lacks a feature sonde cannot run without.
    #[error(transparent)]
    BelowFloor(#[from] crate::platform::kernel::BelowFloor),
    /// A whole-array read or write failed.
    #[error("map {map}: batch operation failed ({source})")]
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
