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

/// What [`locate`] returns when no recorded mapping holds the address or its file has no table.
pub const NONE: (ExecMapping, u32) = (
    ExecMapping {
        start: 0,
        end: 0,
        bias: 0,
        table_id: 0,
        flags: 0,
    },
    0,
);

/// Whether a recorded mapping contains `addr`, with a table or not.
#[inline(always)]
pub fn contains(vmas: &VmaMappings, addr: u64) -> bool {
    position(vmas, addr) < MAX_VMA_MAPPINGS as u32
}

/// The index of the recorded mapping that contains `addr`, or `MAX_VMA_MAPPINGS` when none does.
#[inline(always)]
fn position(vmas: &VmaMappings, addr: u64) -> u32 {
    let count = vmas.count.min(MAX_VMA_MAPPINGS as u32);
    for i in 0..MAX_VMA_MAPPINGS as u32 {
        if i >= count {
            break;
        }
        let Some(m) = vmas.mappings.get((i & MAPPING_MASK) as usize) else {
            break;
        };
        if m.start <= addr && addr < m.end {
            return i;
        }
    }
    MAX_VMA_MAPPINGS as u32
}

/// The mapping of `addr` with its table, and the file's id; [`NONE`] (table id 0, counted) when no
/// recorded mapping contains it or its file has no table. A plain value rather than an `Option`:
/// the compiler left a `None`'s payload undefined and copied it from a register a helper call had
/// just clobbered, which the verifier refuses ("!read_ok") in the global frame steps.
#[inline(always)]
pub fn locate(s: &mut Scratch, vmas: &VmaMappings, addr: u64) -> (ExecMapping, u32) {
    let index = position(vmas, addr);
    // The search ends with one of 17 constants; forgotten, so the step after it is verified once, not
    // once per constant (`crate::verifier`).
    let index = forget(&mut s.opaque, u64::from(index)) as u32;
    let Some(m) = vmas.mappings.get(index as usize) else {
        bump(stat::VMA_MISSED);
        return NONE;
    };
    let bit = 1u32 << (index & MAPPING_MASK);
    let Some(slot) = s.vma_tables.get_mut((index & MAPPING_MASK) as usize) else {
        return NONE;
    };
    if s.vma_known & bit == 0 {
        s.vma_known |= bit;
        // SAFETY: the entry is copied out at once.
        *slot = unsafe { FILE_TABLES.get(m.file) }
            .copied()
            .unwrap_or(FileTable::default());
    }
    if slot.table_id == 0 {
        bump(stat::VMA_NO_TABLE);
        return NONE;
    }
    (
        ExecMapping {
            start: m.start,
            end: m.end,
            bias: m.file_base.wrapping_sub(slot.delta),
            table_id: slot.table_id,
            flags: 0,
        },
        slot.file_id,
    )
}
