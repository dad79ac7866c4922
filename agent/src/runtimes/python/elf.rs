//! What CPython's interpreter binary says of itself, read once per binary as it is first captured
//! (`process::elf_info::ElfReader`): `_PyRuntime`'s address (the file holds an interpreter) and the
//! version from `Py_Version` (3.11+ export it), else from the file's name.

use std::sync::Arc;

use crate::process::{
    ElfReader, RuntimeFact,
    elf_info::{read_u32, symbol},
};

/// The interpreter facts of one binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PyElf {
    /// ELF address of `_PyRuntime`.
    pub(crate) runtime: u64,
    /// (major, minor) from the value of `Py_Version`.
    pub(crate) version: Option<(u8, u8)>,
}

/// Reads [`PyElf`] of every binary as it is first opened.
pub(crate) const READER: ElfReader = ElfReader {
    runtime: super::NAME,
    read,
};

fn read(file: &object::File, bytes: &[u8]) -> Option<RuntimeFact> {
    let runtime = symbol(file, "_PyRuntime")?;
    // Looked up only in interpreters: a miss scans the whole symbol table.
    let version = symbol(file, "Py_Version")
        .and_then(|addr| read_u32(file, bytes, addr))
        .and_then(version_of_hex);
    Some(Arc::new(PyElf { runtime, version }))
}

/// (major, minor) of a `PY_VERSION_HEX` value such as 0x030b02f0 (3.11.2 final).
pub(crate) fn version_of_hex(hex: u32) -> Option<(u8, u8)> {
    let (major, minor) = ((hex >> 24) as u8, (hex >> 16) as u8);
    (major >= 2).then_some((major, minor))
}

/// CPython (major, minor) from an interpreter's file name: `python3.11`, `libpython3.9.so.1.0`,
/// `libpython3.13t.so` (for binaries without `Py_Version`, before 3.11).
pub(crate) fn python_version_from_path(path: &str) -> Option<(u8, u8)> {
    let name = path.rsplit('/').next()?;
    let rest = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"))?;
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    // `python3.11-config` is no interpreter; `python3.11`, `.so...` and ABI flags (`3.7m`, `3.13t`,
    // `3.13d`) are.
    let tail = &rest[minor.len()..];
    let tail = tail.trim_start_matches(['m', 'd', 't', 'u']);
    if !(tail.is_empty() || tail.starts_with(".so")) {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::fs::File;

    use super::*;
    use crate::process::ElfInfo;

    #[test]
    fn debian_python_exports_its_runtime_and_version() {
        let (info, facts) = ElfInfo::read_with(
            &File::open("/usr/bin/python3.11").expect("Debian's python3.11 (package python3.11)"),
            &[READER],
        );
        let py = facts[0]
            .1
            .downcast_ref::<PyElf>()
            .expect("_PyRuntime in .dynsym");
        let runtime = py.runtime;
        assert!(
            info.segments
                .iter()
                .any(|s| s.vaddr <= runtime && runtime < s.vaddr + s.size),
            "_PyRuntime at {runtime:#x} lies in no segment's file bytes: {info:?}"
        );
        assert_eq!(py.version, Some((3, 11)));
        let libc = File::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
        assert!(ElfInfo::read_with(&libc, &[READER]).1.is_empty());
    }

    #[test]
    fn versions_from_py_version_and_file_names() {
        assert_eq!(version_of_hex(0x030b02f0), Some((3, 11)));
        assert_eq!(version_of_hex(0x030d00f0), Some((3, 13)));
        assert_eq!(version_of_hex(0), None);
        for (path, version) in [
            ("/usr/bin/python3.11", Some((3, 11))),
            ("/opt/lib/libpython3.9.so.1.0", Some((3, 9))),
            ("libpython3.10.so", Some((3, 10))),
            ("/usr/lib/libpython3.7m.so.1.0", Some((3, 7))),
            ("/usr/bin/python3.13t", Some((3, 13))),
            ("/usr/bin/python3", None),
            ("/usr/bin/python3.11-config", None),
            ("/usr/lib/libpythonista.so", None),
            ("/usr/bin/cpython3.11", None),
        ] {
            assert_eq!(python_version_from_path(path), version, "{path}");
        }
    }
}
