//! The two profilers of the whole host that the short-lived processes and busy-node sections
//! compare, and how each records.

use std::{path::Path, process::Command};

/// The two host-wide profilers the short-lived processes and busy-node sections compare.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostProfiler {
    Sonde,
    PerfDwarf,
}

impl HostProfiler {
    pub(crate) const ALL: [HostProfiler; 2] = [HostProfiler::Sonde, HostProfiler::PerfDwarf];

    pub(crate) fn name(self) -> &'static str {
        match self {
            HostProfiler::Sonde => "sonde record -F 99 (host)",
            HostProfiler::PerfDwarf => "perf record -F 99 -a --call-graph dwarf",
        }
    }

    /// Its recording of the whole host for `seconds`, its files named from `stem` (`sonde`: the
    /// binary measured).
    pub(crate) fn command(self, sonde: &Path, stem: &Path, seconds: u64) -> Command {
        match self {
            HostProfiler::Sonde => sonde_record(sonde, stem, seconds),
            HostProfiler::PerfDwarf => perf_dwarf_record(stem, seconds),
        }
    }

    /// The start of its files' names.
    pub(crate) fn stem(self) -> &'static str {
        match self {
            HostProfiler::Sonde => "sonde",
            HostProfiler::PerfDwarf => "perf",
        }
    }
}

/// `sonde record` of the whole host at 99 Hz for `seconds`: its profile at `stem`.pb.gz, its folded
/// stacks at `stem`.folded, its summary as JSON on stdout.
fn sonde_record(sonde: &Path, stem: &Path, seconds: u64) -> Command {
    let mut c = Command::new(sonde);
    c.args([
        "record",
        "--summary-json",
        "-",
        "--frequency",
        "99",
        "--duration",
    ])
    .arg(seconds.to_string())
    .arg("--output")
    .arg(stem.with_extension("pb.gz"))
    .arg("--folded")
    .arg(stem.with_extension("folded"));
    c
}

/// `perf record -a --call-graph dwarf` of the whole host at 99 Hz for `seconds`, into `stem`.data.
fn perf_dwarf_record(stem: &Path, seconds: u64) -> Command {
    let data = stem.with_extension("data");
    let _ = std::fs::remove_file(&data);
    let mut c = Command::new("perf");
    c.args([
        "record",
        "-q",
        "-F",
        "99",
        "-a",
        "--call-graph",
        "dwarf",
        "-o",
    ])
    .arg(data)
    .args(["--", "sleep"])
    .arg(seconds.to_string());
    c
}
