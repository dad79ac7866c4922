//! Debug files on local disks, where distributions and build systems put them: next to the binary or
//! under `/usr/lib/debug` by `.gnu_debuglink`, under `/usr/lib/debug/.build-id/`, and in the operator's
//! own directories. Paths of the process are looked up inside its root (`/proc/PID/root`), so a
//! container's debug packages are found, not the host's. A candidate counts only if its build id is the
//! binary's (or, for a binary without one, its CRC is the one the debug link names).

use std::{
    fs::File,
    path::{Component, Path, PathBuf},
};

use super::{DebugFile, Origin};
use crate::process::{
    Binary, ElfInfo,
    untrusted::{self, Input, Refused, Rules},
};

/// The result of a local search.
#[derive(Debug, Default)]
pub(crate) struct Search {
    /// The first matching debug file.
    pub found: Option<DebugFile>,
    /// Candidates rejected because their build id (or CRC) is another binary's.
    pub mismatches: u32,
}

/// The distributions' global debug directory, inside each process root.
const GLOBAL_DEBUG_DIR: &str = "/usr/lib/debug";

/// Largest debug file opened: the biggest real ones (browsers, LLVM) are a few GiB; the CRC check of a
/// binary without build id reads the whole file.
pub(crate) const MAX_DEBUG_FILE_BYTES: u64 = 8 << 30;

/// Where a candidate is.
#[derive(Debug, PartialEq)]
enum Place {
    /// A path as the process sees it, opened inside its root on its behalf.
    InRoot(PathBuf),
    /// A path in an operator's `--debug-dir` (host paths the operator chose).
    Operator(PathBuf),
}

/// Looks for `binary`'s debug file locally, in the documented order; `debug_dirs` are host paths.
pub(crate) fn search(binary: &Binary, debug_dirs: &[PathBuf]) -> Search {
    let root = if binary.root.is_dir() {
        binary.root.clone()
    } else {
        // The process is gone: the host's view is the best left, and the build id check guards it.
        PathBuf::from("/")
    };
    let mut search = Search::default();
    for (place, origin) in candidates(binary, debug_dirs) {
        let (opened, path) = match place {
            Place::InRoot(path) => {
                let rules = Rules {
                    input: Input::DebugFile,
                    symlinks: true,
                    owned: false,
                    user_readable: true,
                    max_bytes: MAX_DEBUG_FILE_BYTES,
                };
                let opened = untrusted::open_in_root(&root, &path, binary.owner.as_ref(), rules);
                (opened, root.join(path.strip_prefix("/").unwrap_or(&path)))
            }
            Place::Operator(path) => (
                untrusted::open_trusted_path(&path, Input::DebugFile, MAX_DEBUG_FILE_BYTES),
                path,
            ),
        };
        let file = match opened {
            Ok(file) => file,
            Err(Refused::Absent) => continue,
            Err(why) => {
                tracing::debug!(binary = %binary.path, candidate = %path.display(), %why, "debug file not opened");
                continue;
            }
        };
        match check(file, binary, origin) {
            Check::Match(file, inflated_dwarf) => {
                // The check read the file's headers already: its DWARF size comes with it.
                search.found = Some(DebugFile {
                    file,
                    origin,
                    path,
                    inflated_dwarf,
                });
                return search;
            }
            Check::Mismatch => {
                tracing::debug!(binary = %binary.path, candidate = %path.display(), "debug file is another build");
                search.mismatches += 1;
            }
            Check::NoSymbols => {}
        }
    }
    search
}

/// Candidate places in lookup order (gdb's and elfutils' order, then the operator's directories). A
/// debug link that is not a plain file name (`../../etc/shadow`) is refused and counted: it names a
/// file next to the binary or in a debug directory, never a path.
fn candidates(binary: &Binary, debug_dirs: &[PathBuf]) -> Vec<(Place, Origin)> {
    let dir = Path::new(&binary.path)
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    // The binary's directory below `/usr/lib/debug` or a debug dir: only plain components, so it
    // cannot climb out of the operator's directory.
    let relative_dir: Option<PathBuf> = dir
        .components()
        .skip_while(|c| matches!(c, Component::RootDir))
        .map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    let link = binary
        .elf
        .debuglink
        .as_ref()
        .map(|(link, _)| link.as_str())
        .filter(|link| untrusted::plain_file_name(link));
    let by_id = binary.build_id().and_then(build_id_path);
    let global = Path::new(GLOBAL_DEBUG_DIR);
    let mut out = Vec::new();
    if let Some(link) = link {
        out.push((Place::InRoot(dir.join(link)), Origin::DebugLink));
        out.push((
            Place::InRoot(dir.join(".debug").join(link)),
            Origin::DebugLink,
        ));
        if let Some(relative_dir) = &relative_dir {
            out.push((
                Place::InRoot(global.join(relative_dir).join(link)),
                Origin::DebugLink,
            ));
        }
    }
    if let Some(by_id) = &by_id {
        out.push((
            Place::InRoot(global.join(".build-id").join(by_id)),
            Origin::BuildIdDir,
        ));
    }
    for d in debug_dirs {
        if let Some(by_id) = &by_id {
            out.push((
                Place::Operator(d.join(".build-id").join(by_id)),
                Origin::DebugDir,
            ));
        }
        if let Some(link) = link {
            out.push((Place::Operator(d.join(link)), Origin::DebugDir));
            if let Some(relative_dir) = &relative_dir {
                out.push((
                    Place::Operator(d.join(relative_dir).join(link)),
                    Origin::DebugDir,
                ));
            }
        }
    }
    out
}

/// `xx/rest.debug` for a build id `xxrest` (the `.build-id` layout).
pub(crate) fn build_id_path(id: &str) -> Option<PathBuf> {
    (id.len() > 2 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| PathBuf::from(&id[..2]).join(format!("{}.debug", &id[2..])))
}

enum Check {
    NoSymbols,
    Mismatch,
    /// The file, and its `ElfInfo::inflated_dwarf`.
    Match(File, u64),
}

fn check(file: File, binary: &Binary, origin: Origin) -> Check {
    let info = ElfInfo::read(&file);
    if !info.has_symtab && !info.has_debug_info {
        return Check::NoSymbols;
    }
    if belongs_to(&info, &file, binary, origin) {
        Check::Match(file, info.inflated_dwarf)
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
    fn a_debug_link_naming_a_path_is_refused_and_names_no_candidate() {
        let path = "/lib/x86_64-linux-gnu/libc.so.6";
        let file = File::open(path).unwrap();
        let mut elf = ElfInfo::read(&file);
        elf.build_id = None;
        elf.debuglink = Some(("../../../etc/shadow".into(), 0));
        let binary = Binary {
            id: (0, 0),
            path: path.into(),
            elf,
            file,
            root: "/proc/self/root".into(),
            owner: None,
            facts: Vec::new(),
        };
        let before = crate::process::untrusted::refusals::total();
        let places = candidates(&binary, &[PathBuf::from("/usr/lib/debug")]);
        assert!(places.is_empty(), "{places:?}");
        assert_eq!(crate::process::untrusted::refusals::total(), before + 1);
    }

    #[test]
    fn build_id_paths_split_the_first_byte() {
        assert_eq!(
            build_id_path("ab12cd").unwrap(),
            PathBuf::from("ab/12cd.debug")
        );
        assert!(build_id_path("ab").is_none());
        assert!(build_id_path("ab/../../x").is_none(), "only hex digits");
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
            owner: crate::process::untrusted::Owner::of(std::process::id()),
            facts: Vec::new(),
        };
        let found = search(&binary, &[]).found.expect("libc6-dbg's debug file");
        assert!(
            matches!(found.origin, Origin::BuildIdDir | Origin::DebugLink),
            "{found:?}"
        );
        let info = ElfInfo::read(&found.file);
        assert_eq!(info.build_id, binary.elf.build_id);
        // Debian compresses its debug files' DWARF: the size counted from the headers is what
        // decompressing gives, and libc's is past the bound, so it is named from its symbol table.
        // SAFETY: a root-owned package file, read only.
        let map = unsafe { memmap2::Mmap::map(&found.file) }.unwrap();
        let elf = object::File::parse(&*map).unwrap();
        use object::{Object as _, ObjectSection as _};
        let decompressed: u64 = elf
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_")))
            .filter(|s| s.compressed_data().unwrap().format != object::CompressionFormat::None)
            .map(|s| s.uncompressed_data().unwrap().len() as u64)
            .sum();
        assert!(decompressed > 0, "no compressed DWARF in {found:?}");
        assert_eq!(found.inflated_dwarf, decompressed);
        assert!(!super::super::reads_dwarf(found.inflated_dwarf));
        assert_eq!(binary.elf.inflated_dwarf, 0, "libc itself carries no DWARF");
    }
}
