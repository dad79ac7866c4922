//! Go binaries, named from their own `.gopclntab`: the table Go's runtime uses for its tracebacks, present
//! in every Go binary, also one built with `-ldflags='-s -w'` that has neither `.symtab` nor DWARF.
//! It gives each function's name, file and line, and the inlined calls at a pc (the inline tree), so Go
//! frames read as `go tool pprof` shows them. Go code is walked by the native unwinder (Go keeps frame
//! pointers on x86_64); the kernel is told where a Go process keeps its goroutines' labels and where
//! its threads' walks end (`GO_PROCS`).

pub(crate) mod buildinfo;
pub(crate) mod capture;
pub(crate) mod elf;
pub(crate) mod figures;
pub(crate) mod labels;
pub(crate) mod naming;
pub(crate) mod pclntab;
pub(crate) mod register;
#[cfg(test)]
pub(crate) mod tests;
mod unwind_rows;

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::Arc,
};

use self::{buildinfo::BuildInfo, pclntab::GoTable};
use super::TableStats;
use crate::{process::Binary, profile::Symbol};

/// The runtime's name (`--runtimes go`), under which what it finds is kept.
pub(crate) const NAME: &str = super::Runtime::Go.name();

/// Executables larger than this are not read for their build info (no Go binary comes near it).
const MAX_EXECUTABLE_BYTES: u64 = 4 << 30;

/// The Go version and main module of the executable at `exe` (`/proc/PID/exe`), or None when it is
/// not a Go binary. The link names the process's own executable, not a path the process chose; it is
/// still read only if it is a regular file of bounded size.
pub(crate) fn build_info(exe: &Path) -> Option<BuildInfo> {
    let file = std::fs::File::open(exe).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_EXECUTABLE_BYTES {
        return None;
    }
    // SAFETY: read-only map, only read; see `GoTable::open` on files changing underneath.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    buildinfo::read(&map)
}

/// What the Go executable at `exe` says of itself: Go and its version, the main module (the service)
/// and its version unless a development build. None when it is not a Go binary.
pub(crate) fn identify(exe: &Path) -> Option<super::seam::ExeIdentity> {
    let info = build_info(exe)?;
    Some(super::seam::ExeIdentity {
        runtime: NAME,
        runtime_version: info.go_version,
        service: info.main_path,
        service_version: info.main_version.filter(|v| v != "(devel)"),
    })
}

/// Where Go's thread roots are, as `sonde_abi::go::ROOT_FUNCTIONS` says; also what makes a
/// symbolized stack complete (`symbolize::roots`).
pub(crate) const ROOT_FUNCTIONS: [&str; sonde_abi::go::ROOT_FUNCTIONS] = [
    "runtime.goexit",
    "runtime.mstart",
    "runtime.rt0_go",
    "runtime.systemstack",
    "runtime.mcall",
    "runtime.morestack",
];

/// The kernel's settings for Go binary `binary`, with link-time addresses (None: not a Go binary):
/// its root functions always, its goroutine labels when its Go version's are known (else
/// `LABELS_NONE`, and why).
pub(crate) fn kernel_settings(
    binary: &Binary,
) -> Option<(sonde_abi::go::GoProc, Result<(), labels::Unsupported>)> {
    if !elf::is_go(binary) {
        return None;
    }
    let meta = binary.file.metadata().ok()?;
    if meta.len() > MAX_EXECUTABLE_BYTES {
        return None;
    }
    // SAFETY: read-only map, only read; see `GoTable::open` on files changing underneath.
    let map = unsafe { memmap2::Mmap::map(&binary.file) }.ok()?;
    // Some builds carry no build info (esbuild 0.28's releases): their labels' layout is unknown,
    // their roots are not.
    let labels = match buildinfo::read(&map) {
        Some(info) => labels::settings(&info, &map),
        None => Err(labels::Unsupported::NoBuildInfo),
    };
    let (mut settings, labels) = match labels {
        Ok(settings) => (settings, Ok(())),
        Err(why) => (sonde_abi::go::GoProc::default(), Err(why)),
    };
    if let Ok(Some(table)) = GoTable::open(&binary.file) {
        let ranges = table.ranges(ROOT_FUNCTIONS);
        for (root, range) in settings.roots.iter_mut().zip(ranges) {
            if let Some((start, end)) = range {
                *root = sonde_abi::go::GoRange { start, end };
            }
        }
    }
    Some((settings, labels))
}

/// The Go tables of the binaries seen, by (device, inode); `None` for a Go binary whose table could
/// not be read, so it is tried once.
#[derive(Default)]
pub(crate) struct GoNames {
    tables: HashMap<(u64, u64), Option<Arc<GoTable>>>,
    /// Read: with the inline tree; partial: without it (physical functions only); failed: unknown
    /// version or malformed, ELF symbols only.
    stats: TableStats,
}

impl GoNames {
    /// Counters so far.
    pub(crate) fn stats(&self) -> TableStats {
        self.stats
    }

    /// The table of `binary` when it is a Go binary, read on first use.
    pub(crate) fn table(&mut self, binary: &Binary) -> Option<Arc<GoTable>> {
        if !elf::is_go(binary) {
            return None;
        }
        let stats = &mut self.stats;
        self.tables
            .entry(binary.id)
            .or_insert_with(|| match GoTable::open(&binary.file) {
                Ok(Some(table)) => {
                    tracing::debug!(
                        binary = %binary.path,
                        functions = table.functions(),
                        inline_tree = table.has_inline_tree(),
                        "Go binary named from its .gopclntab"
                    );
                    match table.has_inline_tree() {
                        true => stats.read += 1,
                        false => stats.partial += 1,
                    }
                    Some(Arc::new(table))
                }
                Ok(None) => None,
                Err(err) => {
                    stats.failed += 1;
                    tracing::warn!(binary = %binary.path, %err, "Go binary named from ELF symbols only");
                    None
                }
            })
            .clone()
    }

    /// Inline chains (innermost first) of file `offsets` of `binary`, read from `table`; empty where
    /// no Go function covers the offset (C code linked in with cgo), for ELF symbols to name.
    pub(crate) fn chains(table: &GoTable, binary: &Binary, offsets: &[u64]) -> Vec<Arc<[Symbol]>> {
        offsets
            .iter()
            .map(|&offset| {
                let frames = table
                    .frames(binary.elf.vaddr_of(offset))
                    .unwrap_or_default();
                frames
                    .into_iter()
                    .map(|f| Symbol {
                        name: f.function,
                        file: f.file,
                        line: f.line,
                    })
                    .collect()
            })
            .collect()
    }

    /// Drops the tables of binaries no longer mapped by any known process.
    pub(crate) fn retain(&mut self, live: &HashSet<(u64, u64)>) {
        self.tables.retain(|id, _| live.contains(id));
    }
}
