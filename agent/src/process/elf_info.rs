//! What sonde needs to know about a mapped ELF file, read once when the binary is first captured: its
//! loadable segments (file offset to ELF address, for unwind tables and debug files), its GNU build id,
//! and what symbols it carries or points to (`.symtab`, DWARF, `.gnu_debuglink`, `.gnu_debugdata`).

use std::fs::File;

use object::{Object as _, ObjectSection as _, ObjectSegment as _};

/// A loadable segment: where its bytes are in the file and where they go in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub size: u64,
}

/// The facts read from one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    /// `PT_LOAD` segments.
    pub segments: Vec<Segment>,
    /// GNU build id, lowercase hex.
    pub build_id: Option<String>,
    /// A `.symtab` with entries (not stripped).
    pub has_symtab: bool,
    /// DWARF line and function information (`.debug_info`).
    pub has_debug_info: bool,
    /// `.gnu_debuglink`: the debug file's name and CRC32.
    pub debuglink: Option<(String, u32)>,
    /// A `.gnu_debugdata` section (MiniDebugInfo: an xz-compressed ELF with a symbol table).
    pub has_debugdata: bool,
}

impl ElfInfo {
    /// Reads `bytes` (not an ELF: everything empty).
    pub fn parse(bytes: &[u8]) -> Self {
        let Ok(file) = object::File::parse(bytes) else {
            return Self::default();
        };
        let has = |name: &str| {
            file.section_by_name(name)
                .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
        };
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
            debuglink: file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
            has_debugdata: has(".gnu_debugdata"),
        }
    }

    /// Reads the open file `file` (mapped, not copied).
    pub fn read(file: &File) -> Self {
        // SAFETY: a binary mapped read-only and only read; a concurrent truncation would fault, which
        // mapped executables do not see (the kernel refuses to write to a running binary).
        match unsafe { memmap2::Mmap::map(file) } {
            Ok(map) => Self::parse(&map),
            Err(_) => Self::default(),
        }
    }

    /// The ELF virtual address of `file_offset`, through the segment holding it.
    pub fn vaddr_of(&self, file_offset: u64) -> u64 {
        self.segments
            .iter()
            .find(|s| s.offset <= file_offset && file_offset < s.offset + s.size)
            .map_or(file_offset, |s| file_offset - s.offset + s.vaddr)
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
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
