//! Finding the table of a frame of a process userspace has not captured: the executable file mapping
//! the kernel recorded for it (`VMA_MAPPINGS`, see `crate::vmas`) that contains the address, then the
//! table of that file (`FILE_TABLES`, by device and inode), looked up once per mapping per walk.

use sonde_abi::{ExecMapping, FileTable, VmaMappings, stat, unwind::MAX_VMA_MAPPINGS};

use super::Scratch;
use crate::{
    maps::{FILE_TABLES, bump},
    verifier::forget,
};

const MAPPING_MASK: u32 = MAX_VMA_MAPPINGS as u32 - 1;

/// The mapping of `addr` with its table, and the file's id; None (counted) when no recorded mapping
/// contains it or its file has no table.
#[inline(always)]
pub fn locate(s: &mut Scratch, vmas: &VmaMappings, addr: u64) -> Option<(ExecMapping, u32)> {
    let count = vmas.count.min(MAX_VMA_MAPPINGS as u32);
    let mut index = MAX_VMA_MAPPINGS as u32;
    for i in 0..MAX_VMA_MAPPINGS as u32 {
        if i >= count {
            break;
        }
        let Some(m) = vmas.mappings.get((i & MAPPING_MASK) as usize) else {
            break;
        };
        if m.start <= addr && addr < m.end {
            index = i;
            break;
        }
    }
    // The search ends with one of 17 constants; forgotten, so the step after it is verified once, not
    // once per constant (`crate::verifier`).
    let index = forget(&mut s.opaque, u64::from(index)) as u32;
    let Some(m) = vmas.mappings.get(index as usize) else {
        bump(stat::VMA_MISSED);
        return None;
    };
    let bit = 1u32 << (index & MAPPING_MASK);
    let slot = s.vma_tables.get_mut((index & MAPPING_MASK) as usize)?;
    if s.vma_known & bit == 0 {
        s.vma_known |= bit;
        // SAFETY: the entry is copied out at once.
        *slot = unsafe { FILE_TABLES.get(m.file) }
            .copied()
            .unwrap_or(FileTable::default());
    }
    if slot.table_id == 0 {
        bump(stat::VMA_NO_TABLE);
        return None;
    }
    Some((
        ExecMapping {
            start: m.start,
            end: m.end,
            bias: m.file_base.wrapping_sub(slot.delta),
            table_id: slot.table_id,
            flags: 0,
        },
        slot.file_id,
    ))
}
