//! Debug files on local disks, where distributions and build systems put them: next to the binary or
//! under `/usr/lib/debug` by `.gnu_debuglink`, under `/usr/lib/debug/.build-id/`, and in the operator's
//! own directories. Paths of the process are looked up inside its root (`/proc/PID/root`), so a
//! container's debug packages are found, not the host's. A candidate counts only if its build id is the
//! binary's (or, for a binary without one, its CRC is the one the debug link names).

use std::{
    fs::File,
    path::{Path, PathBuf},
};

use super::{DebugFile, Origin};
use crate::process::{Binary, ElfInfo};

/// The result of a local search.
#[derive(Debug, Default)]
pub(crate) struct Search {
    /// The first matching debug file.
    pub found: Option<DebugFile>,
    /// Candidates rejected because their build id (or CRC) is another binary's.
    pub mismatches: u32,
}

/// The distributions' global debug directory, inside each process root.
const GLOBAL_DEBUG_DIR: &str = "usr/lib/debug";

/// Looks for `binary`'s debug file locally, in the documented order; `debug_dirs` are host paths.
pub(crate) fn search(binary: &Binary, debug_dirs: &[PathBuf]) -> Search {
    let root = if binary.root.is_dir() {
        binary.root.clone()
    } else {
        // The process is gone: the host's view is the best left, and the build id check guards it.
        PathBuf::from("/")
    };
    let mut search = Search::default();
    for (path, origin) in candidates(binary, &root, debug_dirs) {
        match check(&path, binary, origin) {
            Check::Match(file) => {
                search.found = Some(DebugFile { file, origin, path });
                return search;
            }
            Check::Mismatch => {
                tracing::debug!(binary = %binary.path, candidate = %path.display(), "debug file is another build");
                search.mismatches += 1;
            }
            Check::Absent | Check::NoSymbols => {}
        }
    }
    search
}

/// Candidate paths in lookup order (gdb's and elfutils' order, then the operator's directories).
fn candidates(binary: &Binary, root: &Path, debug_dirs: &[PathBuf]) -> Vec<(PathBuf, Origin)> {
    let within = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let dir = Path::new(&binary.path)
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let relative_dir = dir.strip_prefix("/").unwrap_or(&dir).to_path_buf();
    let by_id = binary.build_id().and_then(build_id_path);
    let mut out = Vec::new();
    if let Some((link, _)) = &binary.elf.debuglink {
        out.push((within(&dir.join(link)), Origin::DebugLink));
        out.push((within(&dir.join(".debug").join(link)), Origin::DebugLink));
        let global = Path::new("/").join(GLOBAL_DEBUG_DIR);
        out.push((
            within(&global.join(&relative_dir).join(link)),
            Origin::DebugLink,
        ));
    }
    if let Some(by_id) = &by_id {
        let global = Path::new("/").join(GLOBAL_DEBUG_DIR).join(".build-id");
        out.push((within(&global.join(by_id)), Origin::BuildIdDir));
    }
    for d in debug_dirs {
        if let Some(by_id) = &by_id {
            out.push((d.join(".build-id").join(by_id), Origin::DebugDir));
        }
        if let Some((link, _)) = &binary.elf.debuglink {
            out.push((d.join(link), Origin::DebugDir));
            out.push((d.join(&relative_dir).join(link), Origin::DebugDir));
        }
    }
    out
}

/// `xx/rest.debug` for a build id `xxrest` (the `.build-id` layout).
pub(crate) fn build_id_path(id: &str) -> Option<PathBuf> {
    (id.len() > 2 && id.is_ascii())
        .then(|| PathBuf::from(&id[..2]).join(format!("{}.debug", &id[2..])))
}

enum Check {
    Absent,
    NoSymbols,
    Mismatch,
    Match(File),
}

fn check(path: &Path, binary: &Binary, origin: Origin) -> Check {
    let Ok(file) = File::open(path) else {
        return Check::Absent;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Check::Absent;
    }
    let info = ElfInfo::read(&file);
    if !info.has_symtab && !info.has_debug_info {
        return Check::NoSymbols;
    }
    if belongs_to(&info, &file, binary, origin) {
        Check::Match(file)
    } else {
        Check::Mismatch
    }
}

/// Whether a debug file with `info` was split from `binary`: same build id; without one on the
/// binary, the debug link's CRC over the whole file (what gdb checks).
pub(crate) fn belongs_to(info: &ElfInfo, file: &File, binary: &Binary, origin: Origin) -> bool {
    match (binary.build_id(), info.build_id.as_deref()) {
        (Some(want), Some(have)) => want == have,
        (Some(_), None) => false,
        (None, _) => {
            let Some((_, crc)) = binary.elf.debuglink else {
                return false;
            };
            origin != Origin::BuildIdDir && crc_of(file) == Some(crc)
        }
    }
}

fn crc_of(file: &File) -> Option<u32> {
    // SAFETY: a read-only mapping of a debug file that is only read.
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    Some(crc32fast::hash(&map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_split_the_first_byte() {
        assert_eq!(
            build_id_path("ab12cd").unwrap(),
            PathBuf::from("ab/12cd.debug")
        );
        assert!(build_id_path("ab").is_none());
    }

    #[test]
    fn debian_libc_finds_its_dbg_package_by_build_id() {
        // libc6-dbg is installed by `cargo xtask setup` (valgrind needs it).
        let path = "/lib/x86_64-linux-gnu/libc.so.6";
        let file = File::open(path).unwrap();
        let binary = Binary {
            id: (0, 0),
            path: path.into(),
            elf: ElfInfo::read(&file),
            file,
            root: "/proc/self/root".into(),
        };
        let found = search(&binary, &[]).found.expect("libc6-dbg's debug file");
        assert!(
            matches!(found.origin, Origin::BuildIdDir | Origin::DebugLink),
            "{found:?}"
        );
        let info = ElfInfo::read(&found.file);
        assert_eq!(info.build_id, binary.elf.build_id);
    }
}
