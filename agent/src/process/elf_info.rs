//! What sonde needs to know about a mapped ELF file, read once when the binary is first captured: its
//! loadable segments (file offset to ELF address, for unwind tables and debug files), its GNU build id,
//! and what symbols it carries or points to (`.symtab`, DWARF, `.gnu_debuglink`, `.gnu_debugdata`).
//! What a runtime needs of the same file (is it an interpreter, a Go binary, a `libjvm.so`) is read in
//! the same pass by the runtime's own [`ElfReader`], and kept opaque here.

use std::{any::Any, fs::File, sync::Arc};

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
}

/// What one runtime read of a binary when it was first opened, of the runtime's own type.
pub(crate) type RuntimeFact = Arc<dyn Any + Send + Sync>;

/// Reads what one runtime needs of a binary, once, in the pass that reads its [`ElfInfo`]: the
/// runtime's name, and a function of the parsed file and its bytes (None: nothing of the runtime's).
#[derive(Clone, Copy)]
pub(crate) struct ElfReader {
    pub runtime: &'static str,
    pub read: fn(&object::File, &[u8]) -> Option<RuntimeFact>,
}

/// What the runtimes read of one binary, by runtime name.
pub(crate) type RuntimeFacts = Vec<(&'static str, RuntimeFact)>;

impl ElfInfo {
    /// Reads `bytes` (not an ELF: everything empty).
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        Self::parse_with(bytes, &[]).0
    }

    /// Reads `bytes`, and what each of `readers` needs of them.
    fn parse_with(bytes: &[u8], readers: &[ElfReader]) -> (Self, RuntimeFacts) {
        let Ok(file) = object::File::parse(bytes) else {
            return (Self::default(), Vec::new());
        };
        let facts = readers
            .iter()
            .filter_map(|r| Some((r.runtime, (r.read)(&file, bytes)?)))
            .collect();
        (Self::of(&file), facts)
    }

    fn of(file: &object::File) -> Self {
        let has = |name: &str| has_section(file, name);
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
            inflated_dwarf: inflated_dwarf(file),
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
            has_debugdata: has(".gnu_debugdata"),
        }
    }

    /// Reads the open file `file` (mapped, not copied).
    pub(crate) fn read(file: &File) -> Self {
        Self::read_with(file, &[]).0
    }

    /// Reads the open file `file` (mapped, not copied), and what each of `readers` needs of it.
    pub(crate) fn read_with(file: &File, readers: &[ElfReader]) -> (Self, RuntimeFacts) {
        // SAFETY: a binary mapped read-only and only read; a concurrent truncation would fault, which
        // mapped executables do not see (the kernel refuses to write to a running binary).
        match unsafe { memmap2::Mmap::map(file) } {
            Ok(map) => Self::parse_with(&map, readers),
            Err(_) => (Self::default(), Vec::new()),
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

/// Whether `file` has a section `name` with bytes in the file.
pub(crate) fn has_section(file: &object::File, name: &str) -> bool {
    file.section_by_name(name)
        .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
}

/// The address of the defined symbol `name`, from `.dynsym` (what an interpreter exports for its
/// extension modules), else `.symtab`.
pub(crate) fn symbol(file: &object::File, name: &str) -> Option<u64> {
    let named = |s: &object::Symbol| !s.is_undefined() && s.name() == Ok(name);
    file.dynamic_symbols()
        .find(named)
        .or_else(|| file.symbols().find(named))
        .map(|s| s.address())
}

/// The little-endian u32 at ELF address `addr`, from the file bytes of the segment holding it.
pub(crate) fn read_u32(file: &object::File, bytes: &[u8], addr: u64) -> Option<u32> {
    Some(u32::from_le_bytes(
        read_bytes(file, bytes, addr, 4)?.try_into().ok()?,
    ))
}

/// The `len` bytes at ELF address `addr`, from the file bytes of the segment holding them (fewer
/// where the segment's file part ends first).
pub(crate) fn read_bytes(
    file: &object::File,
    bytes: &[u8],
    addr: u64,
    len: u64,
) -> Option<Vec<u8>> {
    let (offset, left) = file.segments().find_map(|s| {
        let (offset, size) = s.file_range();
        (s.address() <= addr && addr < s.address() + size)
            .then(|| (offset + (addr - s.address()), s.address() + size - addr))
    })?;
    let at = usize::try_from(offset).ok()?;
    let len = usize::try_from(len.min(left)).ok()?;
    Some(bytes.get(at..at + len)?.to_vec())
}

/// Lowercase hex of `bytes`.
/// The addresses `.eh_frame` pointer encodings of `file` may be relative to: pc-relative (the
/// usual encoding), text- or data-relative (gimli resolves datarel against `.got`, as the x86_64
/// psABI defines it).
pub(crate) fn eh_frame_bases<'data>(
    file: &impl object::Object<'data>,
    eh_frame: u64,
) -> gimli::BaseAddresses {
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(eh_frame);
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    if let Some(hdr) = file.section_by_name(".eh_frame_hdr") {
        bases = bases.set_eh_frame_hdr(hdr.address());
    }
    bases
}

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
