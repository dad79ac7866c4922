//! What sonde needs to know about a mapped ELF file, read once when the binary is first captured: its
//! loadable segments (file offset to ELF address, for unwind tables and debug files), its GNU build id,
//! and what symbols it carries or points to (`.symtab`, DWARF, `.gnu_debuglink`, `.gnu_debugdata`), and
//! whether it is a CPython interpreter (`_PyRuntime`, `Py_Version`: a symbol look-up, no DWARF), a Go
//! binary (`.gopclntab`), HotSpot's `libjvm.so` (its exported `gHotSpotVM*` variables) or Node.js
//! (`elf_v8`: V8's `v8dbg_*` constants).

use std::{collections::BTreeMap, fs::File};

use object::{Object as _, ObjectSection as _, ObjectSegment as _, ObjectSymbol as _};

/// A loadable segment: where its bytes are in the file and where they go in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub size: u64,
}

/// The facts read from one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ElfInfo {
    /// `PT_LOAD` segments.
    pub segments: Vec<Segment>,
    /// GNU build id, lowercase hex.
    pub build_id: Option<String>,
    /// A `.symtab` with entries (not stripped).
    pub has_symtab: bool,
    /// DWARF line and function information (`.debug_info`).
    pub has_debug_info: bool,
    /// Bytes the file's compressed DWARF sections take once decompressed: what reading its DWARF
    /// would hold on the heap (uncompressed sections are read from the mapped file). 0 when none is
    /// compressed.
    pub inflated_dwarf: u64,
    /// `.gnu_debuglink`: the debug file's name and CRC32.
    pub debuglink: Option<(String, u32)>,
    /// A `.gnu_debugdata` section (MiniDebugInfo: an xz-compressed ELF with a symbol table).
    pub has_debugdata: bool,
    /// ELF address of `_PyRuntime`: the file holds a CPython interpreter.
    pub py_runtime: Option<u64>,
    /// CPython (major, minor) from the value of `Py_Version` (3.11+ export it).
    pub py_version: Option<(u8, u8)>,
    /// A Go binary (`.gopclntab`, or Go's build id note or build info where an external linker folded
    /// the table into `.data.rel.ro`): named from its own table (`runtimes::go`).
    pub is_go: bool,
    /// HotSpot's exported VMStructs variables, when the file is a `libjvm.so`.
    pub hotspot: Option<HotspotSymbols>,
    /// V8's postmortem constants and builtins, when the file is `node` or `libnode.so`.
    pub v8: Option<super::elf_v8::V8Symbols>,
}

/// Where a `libjvm.so` describes its own structures (VMStructs): the ELF addresses of its exported
/// `gHotSpotVM*` variables. Each table symbol (`gHotSpotVMStructs`, ...) is a pointer variable to its
/// array; the entry layout is given by the `gHotSpotVM*Entry*Offset` and `*ArrayStride` variables.
/// All of them are read from the process (the layout variables are set at the JVM's start, in
/// `.bss`), so only their addresses are kept here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HotspotSymbols {
    /// ELF address of every `gHotSpotVM*` variable, by name.
    pub by_name: BTreeMap<String, u64>,
}

impl HotspotSymbols {
    /// The names of the four table pointers: a file exporting all of them is a `libjvm.so`.
    pub(crate) const TABLES: [&str; 4] = [
        "gHotSpotVMStructs",
        "gHotSpotVMTypes",
        "gHotSpotVMIntConstants",
        "gHotSpotVMLongConstants",
    ];

    /// The ELF address of the variable `name`.
    pub(crate) fn get(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// The `gHotSpotVM*` variables of `file`'s `.dynsym`, when all four tables are among them. One
    /// pass over `.dynsym` (libjvm exports them for the serviceability agent), and nothing kept for any
    /// other file.
    fn find(file: &object::File) -> Option<Self> {
        let by_name: BTreeMap<String, u64> = file
            .dynamic_symbols()
            .filter(|s| !s.is_undefined())
            .filter_map(|s| {
                let name = s.name().ok()?;
                // Bounded: names of a known prefix and a sane length only.
                (name.starts_with("gHotSpotVM") && name.len() <= 64)
                    .then(|| (name.to_owned(), s.address()))
            })
            .collect();
        Self::TABLES
            .iter()
            .all(|t| by_name.contains_key(*t))
            .then_some(Self { by_name })
    }
}

impl ElfInfo {
    /// Reads `bytes` (not an ELF: everything empty).
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        let Ok(file) = object::File::parse(bytes) else {
            return Self::default();
        };
        let has = |name: &str| {
            file.section_by_name(name)
                .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
        };
        let py_runtime = symbol(&file, "_PyRuntime");
        Self {
            segments: file
                .segments()
                .map(|s| {
                    let (offset, size) = s.file_range();
                    Segment {
                        offset,
                        vaddr: s.address(),
                        size,
                    }
                })
                .collect(),
            build_id: file.build_id().ok().flatten().map(hex),
            has_symtab: has(".symtab"),
            has_debug_info: has(".debug_info") || has(".zdebug_info"),
            inflated_dwarf: inflated_dwarf(&file),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
            has_debugdata: has(".gnu_debugdata"),
            is_go: has(".gopclntab") || has(".note.go.buildid") || has(".go.buildinfo"),
            hotspot: HotspotSymbols::find(&file),
            v8: super::elf_v8::V8Symbols::find(&file, bytes),
            py_runtime,
            // Looked up only in interpreters: a miss scans the whole symbol table.
            py_version: py_runtime
                .and_then(|_| symbol(&file, "Py_Version"))
                .and_then(|addr| read_u32(&file, bytes, addr))
                .and_then(version_of_hex),
        }
    }

    /// Reads the open file `file` (mapped, not copied).
    pub(crate) fn read(file: &File) -> Self {
        // SAFETY: a binary mapped read-only and only read; a concurrent truncation would fault, which
        // mapped executables do not see (the kernel refuses to write to a running binary).
        match unsafe { memmap2::Mmap::map(file) } {
            Ok(map) => Self::parse(&map),
            Err(_) => Self::default(),
        }
    }

    /// The ELF virtual address of `file_offset`, through the segment holding it.
    pub(crate) fn vaddr_of(&self, file_offset: u64) -> u64 {
        self.segments
            .iter()
            .find(|s| s.offset <= file_offset && file_offset < s.offset + s.size)
            .map_or(file_offset, |s| file_offset - s.offset + s.vaddr)
    }
}

/// [`inflated_dwarf`] of an open file (0 when it cannot be mapped or parsed).
pub(crate) fn inflated_dwarf_of(file: &File) -> u64 {
    // SAFETY: as in `ElfInfo::read`; only the headers are read.
    let Ok(map) = (unsafe { memmap2::Mmap::map(file) }) else {
        return 0;
    };
    object::File::parse(&*map).map_or(0, |elf| inflated_dwarf(&elf))
}

/// The decompressed size of `file`'s compressed DWARF sections (`SHF_COMPRESSED`, or GNU `.zdebug_*`),
/// from their headers: nothing is decompressed.
fn inflated_dwarf(file: &object::File) -> u64 {
    file.sections()
        .filter(|s| {
            s.name()
                .is_ok_and(|n| n.starts_with(".debug_") || n.starts_with(".zdebug_"))
        })
        .filter_map(|s| s.compressed_file_range().ok())
        .filter(|r| r.format != object::CompressionFormat::None)
        .map(|r| r.uncompressed_size)
        .fold(0, u64::saturating_add)
}

/// The address of the defined symbol `name`, from `.dynsym` (what an interpreter exports for its
/// extension modules), else `.symtab`.
fn symbol(file: &object::File, name: &str) -> Option<u64> {
    let named = |s: &object::Symbol| !s.is_undefined() && s.name() == Ok(name);
    file.dynamic_symbols()
        .find(named)
        .or_else(|| file.symbols().find(named))
        .map(|s| s.address())
}

/// The little-endian u32 at ELF address `addr`, from the file bytes of the segment holding it.
fn read_u32(file: &object::File, bytes: &[u8], addr: u64) -> Option<u32> {
    let (offset, _) = file.segments().find_map(|s| {
        let (offset, size) = s.file_range();
        (s.address() <= addr && addr + 4 <= s.address() + size)
            .then(|| (offset + (addr - s.address()), size))
    })?;
    let at = usize::try_from(offset).ok()?;
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
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

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let info = ElfInfo::parse(&exe);
        assert!(!info.segments.is_empty());
        assert!(
            info.build_id.as_ref().is_some_and(|b| b.len() == 40),
            "{info:?}"
        );
    }

    #[test]
    fn libc_points_to_its_debug_file() {
        let info = ElfInfo::read(&File::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap());
        assert!(
            !info.has_symtab && !info.has_debug_info,
            "Debian's libc is stripped"
        );
        let (name, _) = info.debuglink.expect("Debian's libc has a .gnu_debuglink");
        assert!(name.ends_with(".debug"), "{name}");
    }

    #[test]
    fn debian_python_exports_its_runtime_and_version() {
        let info = ElfInfo::read(
            &File::open("/usr/bin/python3.11").expect("Debian's python3.11 (package python3.11)"),
        );
        let runtime = info.py_runtime.expect("_PyRuntime in .dynsym");
        assert!(
            info.segments
                .iter()
                .any(|s| s.vaddr <= runtime && runtime < s.vaddr + s.size),
            "_PyRuntime at {runtime:#x} lies in no segment's file bytes: {info:?}"
        );
        assert_eq!(info.py_version, Some((3, 11)));
        let libc = ElfInfo::read(&File::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap());
        assert_eq!((libc.py_runtime, libc.py_version), (None, None));
    }

    #[test]
    fn libjvm_exports_its_vmstructs_and_nothing_else_does() {
        let path = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
        let file = File::open(path).unwrap_or_else(|e| panic!("OpenJDK 17's {path}: {e}"));
        let symbols = ElfInfo::read(&file)
            .hotspot
            .expect("gHotSpotVM* in .dynsym");
        for name in HotspotSymbols::TABLES.into_iter().chain([
            "gHotSpotVMStructEntryArrayStride",
            "gHotSpotVMStructEntryTypeNameOffset",
            "gHotSpotVMTypeEntrySizeOffset",
            "gHotSpotVMLongConstantEntryValueOffset",
        ]) {
            let addr = symbols
                .get(name)
                .unwrap_or_else(|| panic!("{name} missing"));
            assert!(addr > 0, "{name}");
        }
        // 4 tables, 6 struct entry offsets and a stride, 6 + 1 for types, 2 + 1 for each constant table.
        assert_eq!(symbols.by_name.len(), 24, "{:?}", symbols.by_name.keys());
        let libc = ElfInfo::read(&File::open("/lib/x86_64-linux-gnu/libc.so.6").unwrap());
        assert_eq!(libc.hotspot, None);
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

    #[test]
    fn file_offsets_map_to_addresses_through_their_segment() {
        let info = ElfInfo {
            segments: vec![
                Segment {
                    offset: 0,
                    vaddr: 0,
                    size: 0x4a86f0,
                },
                Segment {
                    offset: 0x4a8700,
                    vaddr: 0x4a9700,
                    size: 0xbe8be0,
                },
            ],
            ..Default::default()
        };
        assert_eq!(info.vaddr_of(0x4a92e0), 0x4aa2e0);
        assert_eq!(info.vaddr_of(0x100), 0x100);
    }
}
