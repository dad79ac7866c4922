//! Unwind-table memory and build time, from `sonde unwind-table` (the agent's own table builder, kernel
//! bytes in whole blocks): three named binaries, the largest distinct binaries of this system (the
//! "200 binaries" target), and every binary mapped executable while the benchmark's workloads and
//! sonde ran (what this node needs when busy).

use std::{
    collections::HashSet,
    io::Read as _,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

/// sonde's default `--max-unwind-table-mib`, bytes.
pub(super) const BUDGET_BYTES: u64 = 64 << 20;

/// Distinct binaries of the host-size target.
pub(super) const TARGET_BINARIES: usize = 200;

/// Where the target's binaries are taken from.
const SYSTEM_DIRS: [&str; 2] = ["/usr/bin", "/usr/lib/x86_64-linux-gnu"];

/// One binary's table.
pub(super) struct Table {
    pub(super) path: PathBuf,
    pub(super) file_bytes: u64,
    pub(super) fdes: u64,
    pub(super) rows: u64,
    /// Kernel memory of the table (whole blocks of rows).
    pub(super) bytes: u64,
    pub(super) build_ms: f64,
}

/// Tables of a set of binaries, and the binaries sonde could not build one for.
#[derive(Default)]
pub(super) struct Sweep {
    pub(super) tables: Vec<Table>,
    pub(super) failures: Vec<(PathBuf, String)>,
    pub(super) wall: Duration,
}

impl Sweep {
    /// Kernel bytes of all tables.
    pub(super) fn bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.bytes).sum()
    }

    /// Build time of all tables, ms (one after another, as the agent's single builder thread does).
    pub(super) fn build_ms(&self) -> f64 {
        self.tables.iter().map(|t| t.build_ms).sum()
    }

    /// How many tables fit in `budget` bytes, smallest first (the most binaries it can hold).
    pub(super) fn fitting(&self, budget: u64) -> usize {
        let mut sizes: Vec<u64> = self.tables.iter().map(|t| t.bytes).collect();
        sizes.sort_unstable();
        let mut total = 0;
        sizes
            .iter()
            .take_while(|&&b| {
                total += b;
                total <= budget
            })
            .count()
    }
}

/// Everything the report prints about tables.
pub(super) struct Tables {
    /// libc, python3, the rustc driver (the "100 MB binary").
    pub(super) named: Vec<Table>,
    /// The [`TARGET_BINARIES`] largest distinct ELF files under [`SYSTEM_DIRS`].
    pub(super) largest: Sweep,
    /// Every distinct binary mapped executable by a running process, from [`mapped_binaries`].
    pub(super) mapped: Sweep,
}

/// Measures all three sets; `mapped` is a [`mapped_binaries`] snapshot taken when the node was busy.
pub(super) fn measure(sonde: &Path, mapped: &[PathBuf]) -> anyhow::Result<Tables> {
    let mut named = Vec::new();
    for path in [
        PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
        PathBuf::from("/usr/bin/python3.11"),
        rustc_driver()?,
    ] {
        named.push(inspect(sonde, &path).map_err(|e| anyhow::anyhow!(e))?);
    }
    let largest = sweep(sonde, &largest_system_binaries()?);
    let mapped = sweep(sonde, mapped);
    Ok(Tables {
        named,
        largest,
        mapped,
    })
}

/// The largest `librustc_driver-*.so` of the installed toolchains: a real 150 MB shared library.
fn rustc_driver() -> anyhow::Result<PathBuf> {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let toolchains = Path::new(&home).join(".rustup/toolchains");
    let mut best: Option<(u64, PathBuf)> = None;
    for toolchain in std::fs::read_dir(&toolchains)
        .with_context(|| format!("listing {}", toolchains.display()))?
        .flatten()
    {
        let Ok(libs) = std::fs::read_dir(toolchain.path().join("lib")) else {
            continue;
        };
        for lib in libs.flatten() {
            let name = lib.file_name().to_string_lossy().into_owned();
            let size = lib.metadata().map(|m| m.len()).unwrap_or(0);
            if name.starts_with("librustc_driver-")
                && name.ends_with(".so")
                && best.as_ref().is_none_or(|(s, _)| size > *s)
            {
                best = Some((size, lib.path()));
            }
        }
    }
    match best {
        Some((_, path)) => Ok(path),
        None => bail!(
            "no librustc_driver-*.so under {}/*/lib: the 100 MB binary of the table benchmark is the rustc driver of an installed toolchain",
            toolchains.display()
        ),
    }
}

/// Tables of `paths`, one `sonde unwind-table` process each (the command stops at its first failure).
fn sweep(sonde: &Path, paths: &[PathBuf]) -> Sweep {
    let started = Instant::now();
    let mut out = Sweep::default();
    for path in paths {
        match inspect(sonde, path) {
            Ok(t) => out.tables.push(t),
            Err(e) => out.failures.push((path.clone(), e)),
        }
    }
    out.wall = started.elapsed();
    out
}

/// Runs `sonde unwind-table PATH`; the error is sonde's message.
fn inspect(sonde: &Path, path: &Path) -> Result<Table, String> {
    let out = Command::new(sonde)
        .arg("unwind-table")
        .arg(path)
        .output()
        .map_err(|e| format!("starting {}: {e}", sonde.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("{}: {}", out.status, last.trim()));
    }
    let line = stdout.lines().next().unwrap_or("");
    let mut table = parse_line(path, line).ok_or_else(|| format!("unexpected output {line:?}"))?;
    table.file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Ok(table)
}

/// Reads `PATH source=EhFrame fdes=N rows=N ... bytes=N pages=N build_ms=X.X`.
fn parse_line(path: &Path, line: &str) -> Option<Table> {
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
    };
    let int = |key: &str| field(key)?.parse::<u64>().ok();
    Some(Table {
        path: path.to_owned(),
        file_bytes: 0,
        fdes: int("fdes")?,
        rows: int("rows")?,
        bytes: int("bytes")?,
        build_ms: field("build_ms")?.parse().ok()?,
    })
}

/// The [`TARGET_BINARIES`] largest x86_64 executables and shared libraries under [`SYSTEM_DIRS`],
/// one per inode (Mesa's drivers are one file with a dozen names); the rustc driver is left out as it
/// is measured on its own.
fn largest_system_binaries() -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in SYSTEM_DIRS {
        walk(Path::new(dir), &mut files);
    }
    files.sort_by_key(|(size, _, _)| std::cmp::Reverse(*size));
    let mut seen = HashSet::new();
    let picked: Vec<PathBuf> = files
        .into_iter()
        .filter(|(_, id, path)| {
            !path.to_string_lossy().contains("rustc_driver")
                && is_elf_x86_64(path)
                && seen.insert(*id)
        })
        .map(|(_, _, path)| path)
        .take(TARGET_BINARIES)
        .collect();
    if picked.len() < TARGET_BINARIES {
        bail!(
            "only {} ELF binaries under {SYSTEM_DIRS:?}, fewer than the {TARGET_BINARIES} of the target",
            picked.len()
        );
    }
    Ok(picked)
}

/// Regular files under `dir` (symbolic links not followed): (size, (dev, inode), path).
fn walk(dir: &Path, out: &mut Vec<(u64, (u64, u64), PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            walk(&entry.path(), out);
        } else if meta.is_file() {
            out.push((meta.len(), (meta.dev(), meta.ino()), entry.path()));
        }
    }
}

/// Whether `path` is an x86_64 ELF executable or shared object (ET_EXEC or ET_DYN).
fn is_elf_x86_64(path: &Path) -> bool {
    let mut header = [0u8; 20];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut header));
    // e_ident: magic, then ELFCLASS64 (2) and little-endian (1); e_type at 16, e_machine at 18.
    let e_type = u16::from_le_bytes([header[16], header[17]]);
    let e_machine = u16::from_le_bytes([header[18], header[19]]);
    read.is_ok()
        && header[..4] == *b"\x7fELF"
        && header[4] == 2
        && header[5] == 1
        && matches!(e_type, 2 | 3)
        && e_machine == 62
}

/// Every distinct file mapped executable by a running process, one per inode. A file is named by its
/// path when that is the same file from here (it stays readable after the process exits), else
/// through the process's root (a container's binary).
pub(super) fn mapped_binaries() -> Vec<PathBuf> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for proc in procs.flatten() {
        let pid = proc.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for line in maps.lines() {
            // address perms offset dev inode path
            let mut fields = line.split_whitespace();
            let perms = fields.nth(1).unwrap_or("");
            let path = fields.nth(3).unwrap_or("");
            if !perms.contains('x') || !path.starts_with('/') || line.ends_with("(deleted)") {
                continue;
            }
            let through_root = PathBuf::from(format!("/proc/{pid}/root{path}"));
            let Ok(meta) = std::fs::metadata(&through_root) else {
                continue;
            };
            let id = (meta.dev(), meta.ino());
            let same_here = std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == id);
            let file = if same_here {
                PathBuf::from(path)
            } else {
                through_root
            };
            if seen.insert(id) && is_elf_x86_64(&file) {
                out.push(file);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(bytes: u64) -> Table {
        Table {
            path: PathBuf::new(),
            file_bytes: 0,
            fdes: 0,
            rows: 0,
            bytes,
            build_ms: 0.0,
        }
    }

    #[test]
    fn the_inspect_line_is_read_by_key() {
        let line = "/usr/lib/libc.so.6 source=EhFrame fdes=3000 rows=51234 unsupported_rows=2 plt_rows=1 signal_rows=1 end_rows=3 bytes=425984 pages=420 build_ms=12.5";
        let t = parse_line(Path::new("/usr/lib/libc.so.6"), line).expect("parsed");
        assert_eq!((t.fdes, t.rows, t.bytes), (3000, 51234, 425984));
        assert_eq!(t.build_ms, 12.5);
        assert!(parse_line(Path::new("x"), "x source=EhFrame").is_none());
    }

    #[test]
    fn fitting_counts_smallest_first() {
        let sweep = Sweep {
            tables: vec![table(50), table(10), table(30), table(20)],
            ..Sweep::default()
        };
        assert_eq!(sweep.fitting(60), 3);
        assert_eq!(sweep.fitting(5), 0);
        assert_eq!(sweep.bytes(), 110);
    }
}
