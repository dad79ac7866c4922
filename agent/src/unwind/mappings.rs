//! A process's executable mappings as the kernel's unwinder needs them ([`ProcMappings`]): address
//! range, table id and the load bias that turns a runtime address into the table's ELF address.

use crate::process::elf_info::Segment;
use sonde_abi::{
    ExecMapping, ProcMappings,
    unwind::{MAPPING_NO_UNWIND_INFO, MAX_EXEC_MAPPINGS},
};

/// `table_pc = pc - bias` for a mapping of `file_offset` at `start`: the segment the mapping maps
/// says which ELF address the offset has (p_vaddr - p_offset is 0 for most binaries, not all).
///
/// The kernel maps a segment from its page-aligned offset, which can lie inside the previous
/// segment's bytes: lld places the executable segment at p_offset 0x4a8700, p_vaddr 0x4a9700, mapped
/// from offset 0x4a8000. So the segment is the one whose page-aligned offset is the mapping's; only
/// failing that, the one containing it.
pub(crate) fn bias(start: u64, file_offset: u64, segments: &[Segment]) -> u64 {
    let page_aligned = |s: &&Segment| s.offset & !(PAGE - 1) == file_offset;
    let containing =
        |s: &&Segment| s.offset <= file_offset && file_offset < s.offset + s.size.max(1);
    let segment = segments
        .iter()
        .find(page_aligned)
        .or_else(|| segments.iter().find(containing));
    let delta = segment.map_or(0, |s| s.vaddr.wrapping_sub(s.offset));
    start.wrapping_sub(file_offset).wrapping_sub(delta)
}

/// Page size of the mappings (x86_64).
const PAGE: u64 = 4096;

/// What the kernel should do for one mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unwinding {
    /// Use table `id` with `bias`.
    Table {
        /// Table id.
        id: u32,
        /// Load bias.
        bias: u64,
    },
    /// A table is expected but not loaded (being built, or evicted): frame pointers meanwhile.
    Pending,
    /// No table will ever exist (anonymous or JIT code, a binary without CFI or for another
    /// architecture): frame pointers.
    NoInfo,
}

/// Builds the kernel's view of a process from its mappings (sorted by start), read at
/// `read_at_ns` (CLOCK_MONOTONIC, the kernel's clock): the kernel asks for the next re-read no sooner
/// than its refresh interval after that. Returns the value and how many mappings did not fit.
pub(crate) fn proc_mappings(
    mappings: &[(u64, u64, Unwinding)],
    read_at_ns: u64,
) -> (Box<ProcMappings>, usize) {
    let mut out = Box::new(ProcMappings {
        count: 0,
        _pad: 0,
        refresh_requested_ns: read_at_ns,
        mappings: [ExecMapping::default(); MAX_EXEC_MAPPINGS],
    });
    for (slot, &(start, end, how)) in out.mappings.iter_mut().zip(mappings) {
        let (table_id, bias, flags) = match how {
            Unwinding::Table { id, bias } => (id, bias, 0),
            Unwinding::Pending => (0, 0, 0),
            Unwinding::NoInfo => (0, 0, MAPPING_NO_UNWIND_INFO),
        };
        *slot = ExecMapping {
            start,
            end,
            bias,
            table_id,
            flags,
        };
    }
    out.count = mappings.len().min(MAX_EXEC_MAPPINGS) as u32;
    (out, mappings.len().saturating_sub(MAX_EXEC_MAPPINGS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bias_follows_the_segment_of_the_mapped_offset() {
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
        let b = bias(0x401000, 0x1000, &segments);
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
        let b = bias(0x7f0000002000, 0x2000, &lib);
        assert_eq!(0x7f0000002345 - b, 0x2345);
        // lld-style: p_vaddr = p_offset + 0x1000.
        let lld = [Segment {
            offset: 0x1000,
            vaddr: 0x2000,
            size: 0x8000,
        }];
        let b = bias(0x55000001000, 0x1000, &lld);
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
        let b = bias(0x55d4c4ab1000, 0x4a8000, &sonde);
        assert_eq!(0x55d4c4ab1000 - b, 0x4a9000);
        assert_eq!(0x55d4c4ab12e0 - b, 0x4a92e0);
    }

    #[test]
    fn entries_keep_order_and_overflow_is_reported() {
        let many: Vec<(u64, u64, Unwinding)> = (0..MAX_EXEC_MAPPINGS as u64 + 3)
            .map(|i| (i * 0x1000, i * 0x1000 + 0x800, Unwinding::NoInfo))
            .collect();
        let (value, dropped) = proc_mappings(&many, 0);
        assert_eq!(value.count as usize, MAX_EXEC_MAPPINGS);
        assert_eq!(dropped, 3);
        assert_eq!(value.mappings[1].start, 0x1000);
        assert_eq!(value.mappings[1].flags, MAPPING_NO_UNWIND_INFO);
        let (value, _) = proc_mappings(
            &[(0x1000, 0x2000, Unwinding::Table { id: 9, bias: 0x10 })],
            77,
        );
        assert_eq!(value.refresh_requested_ns, 77);
        assert_eq!(
            (
                value.mappings[0].table_id,
                value.mappings[0].bias,
                value.count
            ),
            (9, 0x10, 1)
        );
    }
}
