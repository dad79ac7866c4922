//! The load bias of a mapping: what turns an address in a process into the ELF address of the file
//! it maps, the one fact the unwind tables, the runtimes' symbols and the symbolizer all need.

use super::elf_info::Segment;

/// `table_pc = pc - bias` for a mapping of `file_offset` at `start`: the segment the mapping maps
/// says which ELF address the offset has (p_vaddr - p_offset is 0 for most binaries, not all).
///
/// The kernel maps a segment from its page-aligned offset, which can lie inside the previous
/// segment's bytes: lld places the executable segment at p_offset 0x4a8700, p_vaddr 0x4a9700, mapped
/// from offset 0x4a8000. So the segment is the one whose page-aligned offset is the mapping's; only
/// failing that, the one containing it.
pub(crate) fn load_bias(start: u64, file_offset: u64, segments: &[Segment]) -> u64 {
    let page_aligned =
        |s: &&Segment| s.offset & !(crate::platform::arch::PAGE_SIZE - 1) == file_offset;
    let containing =
        |s: &&Segment| s.offset <= file_offset && file_offset < s.offset + s.size.max(1);
    let segment = segments
        .iter()
        .find(page_aligned)
        .or_else(|| segments.iter().find(containing));
    let delta = segment.map_or(0, |s| s.vaddr.wrapping_sub(s.offset));
    start.wrapping_sub(file_offset).wrapping_sub(delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bias_follows_the_segment_of_the_mapped_offset() {
        // A non-PIE binary: text segment at file offset 0x1000, address 0x401000.
        let segments = [
            Segment {
                offset: 0,
                vaddr: 0x400000,
                size: 0x1000,
            },
            Segment {
                offset: 0x1000,
                vaddr: 0x401000,
                size: 0x5000,
            },
        ];
        let b = load_bias(0x401000, 0x1000, &segments);
        assert_eq!(
            0x401234 - b,
            0x401234,
            "mapped at its link address: no bias"
        );
        // A shared library mapped at 0x7f0000000000, text at offset 0x2000 == vaddr 0x2000.
        let lib = [Segment {
            offset: 0x2000,
            vaddr: 0x2000,
            size: 0x8000,
        }];
        let b = load_bias(0x7f0000002000, 0x2000, &lib);
        assert_eq!(0x7f0000002345 - b, 0x2345);
        // lld-style: p_vaddr = p_offset + 0x1000.
        let lld = [Segment {
            offset: 0x1000,
            vaddr: 0x2000,
            size: 0x8000,
        }];
        let b = load_bias(0x55000001000, 0x1000, &lld);
        assert_eq!(0x55000001010 - b, 0x2010);
        // sonde's own binary (rust-lld): the executable segment starts mid-page, and the page the
        // kernel maps it from also holds the end of the read-only segment before it.
        let sonde = [
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
        ];
        // /proc/PID/maps: 55d4c4ab1000-55d4c569a000 r-xp 004a8000 ... sonde
        let b = load_bias(0x55d4c4ab1000, 0x4a8000, &sonde);
        assert_eq!(0x55d4c4ab1000 - b, 0x4a9000);
        assert_eq!(0x55d4c4ab12e0 - b, 0x4a92e0);
    }
}
