//! Where a stripped binary's symbols are: for each binary with neither DWARF nor `.symtab`, look in
//! this order and take the first debug file of the same build:
//! 1. `.gnu_debuglink` next to the binary, in its `.debug/`, and in `/usr/lib/debug/<dir>/`;
//! 2. `/usr/lib/debug/.build-id/xx/rest.debug`;
//! 3. the operator's `--debug-dir`s (`.build-id/` layout, or the debug link's name);
//! 4. `.gnu_debugdata` (MiniDebugInfo), decompressed in-process;
//! 5. a debuginfod server, asynchronously.
//!
//! Steps 1–4 run once per binary when it is first symbolized; step 5 answers at once and is asked
//! again each window until it has the file (a miss or failure is retried when its TTL ends).

pub(crate) mod debuginfod;
mod local;
pub(crate) mod minidebug;

use std::{fs::File, path::PathBuf};

pub(crate) use debuginfod::{CacheDirError, DebuginfodConfig, DebuginfodStats};

use crate::process::Binary;

/// Largest decompressed DWARF a file is symbolized with. blazesym decompresses a compressed debug
/// section whole onto the heap and keeps it while the file stays parsed: Debian's libc debug file
/// (4 MB on disk) held 13.5 MB of heap, a fifth of the daemon's RSS with four workloads. A file whose
/// compressed DWARF would take more is symbolized from its symbol table: function names, without
/// inlined functions or lines (what Pyroscope's agent gives every binary). Uncompressed DWARF is read
/// from the mapped file, so it takes no heap and no bound applies.
const MAX_INFLATED_DWARF: u64 = 8 << 20;

/// Whether a file whose compressed DWARF inflates to `inflated` bytes is symbolized with its DWARF.
pub(crate) fn reads_dwarf(inflated: u64) -> bool {
    inflated <= MAX_INFLATED_DWARF
}

/// Where a debug file came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Named by `.gnu_debuglink`.
    DebugLink,
    /// `/usr/lib/debug/.build-id/`.
    BuildIdDir,
    /// An operator-given `--debug-dir`.
    DebugDir,
    /// The binary's own `.gnu_debugdata`.
    MiniDebugInfo,
    /// A debuginfod server (or its cache).
    Debuginfod,
}

/// A separate file with a binary's symbols, open.
#[derive(Debug)]
pub(crate) struct DebugFile {
    /// The open file; symbolized through `/proc/self/fd/N`.
    pub file: File,
    /// How it was found.
    pub origin: Origin,
    /// Where (for logs).
    pub path: PathBuf,
    /// Its compressed DWARF's decompressed size (`ElfInfo::inflated_dwarf`).
    pub inflated_dwarf: u64,
}

impl DebugFile {
    pub(crate) fn new(file: File, origin: Origin, path: PathBuf) -> Self {
        Self {
            inflated_dwarf: crate::process::inflated_dwarf_of(&file),
            file,
            origin,
            path,
        }
    }

    /// The path blazesym reads it by, valid whatever the process root it was found in.
    pub(crate) fn open_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd as _;
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// Why frames of a binary have no names: what the operator should fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Reason {
    /// Symbols are there, but none covers these addresses.
    NoSymbols,
    /// Stripped, and no debug file was found (no debuginfod configured).
    NoDebugFile,
    /// Stripped; the debug files found are of another build.
    BuildIdMismatch,
    /// Stripped; the debuginfod fetch has not finished yet.
    DebuginfodPending,
    /// Stripped; no debuginfod server has this build.
    DebuginfodMiss,
    /// Stripped; the debuginfod fetch failed (timeout, connection, server error).
    DebuginfodFailed,
    /// The mapped file could not be opened.
    Unreadable,
    /// Anonymous executable memory (JIT code) without a perf map entry.
    NoPerfMap,
    /// `[unmapped]`: the process was gone before sonde read its mappings, and the kernel walked it by
    /// frame pointers (its binaries had no table yet), so the addresses belong to no known file.
    ProcessGone,
    /// `[unmapped]`: the address lies in no mapping the process had when sonde last read them.
    OutsideMappings,
    /// `[unmapped]`: a frame the kernel stored relative to a binary file sonde no longer knows (its
    /// table was evicted, and the file closed, before the window was named).
    UnknownFile,
}

impl Reason {
    /// The name used in summaries and logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NoSymbols => "no symbols",
            Self::NoDebugFile => "no debug file",
            Self::BuildIdMismatch => "build-id mismatch",
            Self::DebuginfodPending => "debuginfod pending",
            Self::DebuginfodMiss => "debuginfod miss",
            Self::DebuginfodFailed => "debuginfod failed",
            Self::Unreadable => "unreadable file",
            Self::NoPerfMap => "no perf map",
            Self::ProcessGone => "process gone",
            Self::OutsideMappings => "outside mappings",
            Self::UnknownFile => "file unknown",
        }
    }

    /// Whether asking debuginfod again may change it (pending, or a miss or failure whose time to
    /// be retried will come).
    pub(crate) fn asks_debuginfod(self) -> bool {
        matches!(
            self,
            Self::DebuginfodPending | Self::DebuginfodMiss | Self::DebuginfodFailed
        )
    }
}

/// What a binary is symbolized from.
#[derive(Debug)]
pub(crate) enum Resolved {
    /// Its own DWARF or `.symtab`.
    Own,
    /// A separate debug file (then its own `.dynsym` for what that lacks).
    Debug(DebugFile),
    /// Only its `.dynsym`, for `reason`.
    Missing(Reason),
}

/// Debug file settings.
#[derive(Clone, Debug, Default)]
pub struct DebugInfoConfig {
    /// Extra directories holding debug files (host paths).
    pub debug_dirs: Vec<PathBuf>,
    /// The debuginfod client, when servers are configured.
    pub debuginfod: Option<DebuginfodConfig>,
}

/// Counters of debug file discovery, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DebugInfoStats {
    /// Binaries with their own symbols.
    pub own: u64,
    /// Debug files found on local disks.
    pub local: u64,
    /// MiniDebugInfo sections used.
    pub minidebuginfo: u64,
    /// Debug files from debuginfod.
    pub debuginfod: u64,
    /// Local debug files rejected because they are another build's.
    pub mismatches: u64,
    /// Binaries symbolized from a symbol table because their DWARF is compressed and too large to
    /// hold decompressed ([`MAX_INFLATED_DWARF`]).
    pub dwarf_too_large: u64,
    /// The debuginfod client's counters.
    pub client: DebuginfodStats,
}

/// Finds debug files.
pub(crate) struct DebugInfo {
    debug_dirs: Vec<PathBuf>,
    client: Option<debuginfod::Client>,
    stats: DebugInfoStats,
}

impl DebugInfo {
    /// Starts the debuginfod client when configured.
    pub(crate) fn new(config: DebugInfoConfig) -> Result<Self, CacheDirError> {
        let client = config
            .debuginfod
            .filter(|c| !c.urls.is_empty())
            .map(debuginfod::Client::start)
            .transpose()?;
        Ok(Self {
            debug_dirs: config.debug_dirs,
            client,
            stats: DebugInfoStats::default(),
        })
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> DebugInfoStats {
        DebugInfoStats {
            client: self
                .client
                .as_ref()
                .map(debuginfod::Client::stats)
                .unwrap_or_default(),
            ..self.stats
        }
    }

    /// The first time a binary is symbolized: its own symbols, a local debug file, its MiniDebugInfo,
    /// or what debuginfod says now.
    pub(crate) fn resolve(&mut self, binary: &Binary) -> Resolved {
        let resolved = self.find(binary);
        match &resolved {
            Resolved::Own => self.count_dwarf(binary, binary.elf.inflated_dwarf),
            // A debuginfod file is counted by `poll`, which also answers later.
            Resolved::Debug(debug) if debug.origin != Origin::Debuginfod => {
                self.count_dwarf(binary, debug.inflated_dwarf);
            }
            _ => {}
        }
        resolved
    }

    fn count_dwarf(&mut self, binary: &Binary, inflated: u64) {
        if !reads_dwarf(inflated) {
            tracing::debug!(binary = %binary.path, inflated, "symbolized without its DWARF: too large decompressed");
            self.stats.dwarf_too_large += 1;
        }
    }

    fn find(&mut self, binary: &Binary) -> Resolved {
        if binary.elf.has_debug_info || binary.elf.has_symtab {
            self.stats.own += 1;
            return Resolved::Own;
        }
        let search = local::search(binary, &self.debug_dirs);
        self.stats.mismatches += u64::from(search.mismatches);
        if let Some(found) = search.found {
            tracing::debug!(binary = %binary.path, debug = %found.path.display(), origin = ?found.origin, "debug file");
            self.stats.local += 1;
            return Resolved::Debug(found);
        }
        if binary.elf.has_debugdata {
            match minidebug::extract(binary) {
                Ok(file) => {
                    self.stats.minidebuginfo += 1;
                    return Resolved::Debug(DebugFile::new(
                        file,
                        Origin::MiniDebugInfo,
                        PathBuf::from(".gnu_debugdata"),
                    ));
                }
                Err(err) => tracing::debug!(binary = %binary.path, %err, "MiniDebugInfo unusable"),
            }
        }
        let fallback = if search.mismatches > 0 {
            Reason::BuildIdMismatch
        } else {
            Reason::NoDebugFile
        };
        self.poll(binary).unwrap_or(Resolved::Missing(fallback))
    }

    /// Asks debuginfod (None without a client or a build id).
    pub(crate) fn poll(&mut self, binary: &Binary) -> Option<Resolved> {
        let client = self.client.as_ref()?;
        let id = binary.build_id()?;
        Some(match client.lookup(id) {
            debuginfod::Lookup::Ready(file) => {
                self.stats.debuginfod += 1;
                let debug = DebugFile::new(
                    file,
                    Origin::Debuginfod,
                    PathBuf::from(format!("debuginfod:{id}")),
                );
                self.count_dwarf(binary, debug.inflated_dwarf);
                Resolved::Debug(debug)
            }
            debuginfod::Lookup::Pending => Resolved::Missing(Reason::DebuginfodPending),
            debuginfod::Lookup::Miss => Resolved::Missing(Reason::DebuginfodMiss),
            debuginfod::Lookup::Failed => Resolved::Missing(Reason::DebuginfodFailed),
        })
    }
}
