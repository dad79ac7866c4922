//! Finding the unwind rule of an address: its mapping in the process's [`ProcMappings`], then the
//! table row in effect (page entry, then a binary search in the page's rows). Every index is masked
//! against the array it reads, so the verifier can prove each access in bounds.
//!
//! Both searches are branch-free lower bounds with a fixed number of steps: a branch per step would
//! give the verifier two states per step to explore (2^13 for a page), far beyond its budget, while
//! arithmetic selects keep one.

use sonde_abi::{
    ExecMapping, PageKey, ProcMappings, UnwindRule,
    unwind::{MAX_EXEC_MAPPINGS, PAGE_SHIFT, ROW_CHUNK_BLOCKS, ROWS_PER_BLOCK, cfa},
};

use crate::maps::{UNWIND_PAGES, UNWIND_ROWS, UNWIND_RULES};

/// Search steps: enough to narrow a page's rows (at most 4096, one per byte) and the 256 mappings to
/// one.
const ROW_SEARCH_STEPS: usize = 13;
const _: () = assert!(1 << (ROW_SEARCH_STEPS - 1) >= 1 << PAGE_SHIFT);
const _: () = assert!(ROWS_PER_BLOCK >= MAX_EXEC_MAPPINGS);
const ROW_MASK: u32 = ROWS_PER_BLOCK as u32 - 1;
const MAPPING_MASK: u32 = MAX_EXEC_MAPPINGS as u32 - 1;

/// The mapping containing `addr`. `hint` is the index found for the previous frame: consecutive frames
/// are usually in one binary, so it is tried first and updated.
#[inline(always)]
pub fn mapping(procs: &ProcMappings, addr: u64, hint: &mut u32) -> Option<ExecMapping> {
    let count = procs.count.min(MAX_EXEC_MAPPINGS as u32);
    let at = |i: u32| procs.mappings.get((i & MAPPING_MASK) as usize).copied();
    // Masked after a volatile read, so the mask stays in the program: from `hint < count <= 256`
    // the compiler would drop it as a no-op, and Linux 6.1's verifier learns no bound from a
    // comparison of two registers (6.12's does), so the index looked unbounded there.
    // SAFETY: `hint` is a valid, exclusive reference.
    let hinted = unsafe { core::ptr::read_volatile(hint) } & MAPPING_MASK;
    if hinted < count {
        let m = at(hinted)?;
        if m.start <= addr && addr < m.end {
            return Some(m);
        }
    }
    let index = last_at_or_below(count, addr, |i| at(i).map_or(u64::MAX, |m| m.start))?;
    let m = at(index)?;
    (m.start <= addr && addr < m.end).then(|| {
        *hint = index;
        m
    })
}

/// Index of the last of `count` sorted keys that is `<= target` (or the first index when none is):
/// `base` moves forward by half of what is left when the key there is not above the target.
#[inline(always)]
fn last_at_or_below(count: u32, target: u64, key: impl Fn(u32) -> u64) -> Option<u32> {
    if count == 0 {
        return None;
    }
    let (mut base, mut n) = (0u32, count);
    for _ in 0..ROW_SEARCH_STEPS {
        let half = n / 2;
        // 1 when key(base + half) <= target, as arithmetic (no branch): keys and targets are below 2^63.
        let below = ((target.wrapping_sub(key(base + half)) >> 63) ^ 1) as u32;
        base += below * half;
        n -= half;
    }
    Some(base)
}

/// Rows remembered per CPU: a return address seen once is usually seen again in the next samples of
/// the process (only the innermost frames change), and a hit costs one cache line instead of a page
/// lookup and a search in memory the previous 10 ms of work have evicted.
pub const ROW_CACHE_SLOTS: usize = 256;

/// One remembered lookup. A (table id, address) pair always has the same rule: tables are never
/// changed in place, ids and rule indices are never reused, so entries never go stale.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CachedRow {
    /// `table_id << 32 | table_pc`; 0 for an empty slot (table ids start at 1).
    key: u64,
    rule: UnwindRule,
    _pad: u32,
}

/// The rule of table `table_id` in effect at `table_pc`, through `cache`; a `cfa::NO_INFO` rule when
/// the page has no rows (no FDE covers it, or the table was evicted).
#[inline(always)]
pub fn rule_cached(
    cache: &mut [CachedRow; ROW_CACHE_SLOTS],
    table_id: u32,
    table_pc: u64,
) -> Option<UnwindRule> {
    let pc = u32::try_from(table_pc).ok()?;
    let key = u64::from(table_id) << 32 | u64::from(pc);
    let slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize & (ROW_CACHE_SLOTS - 1);
    let entry = cache.get_mut(slot)?;
    if entry.key == key {
        return Some(entry.rule);
    }
    let found = rule(table_id, pc).unwrap_or(UnwindRule {
        kind: cfa::NO_INFO,
        ..Default::default()
    });
    *entry = CachedRow {
        key,
        rule: found,
        _pad: 0,
    };
    Some(found)
}

/// The rule at `index` of the rules all tables share (`ExecMapping::bias` of a `MAPPING_RULE`
/// mapping).
#[inline(always)]
pub fn rule_at(index: u64) -> Option<UnwindRule> {
    UNWIND_RULES.get(u32::try_from(index).ok()?).copied()
}

/// The rule of table `table_id` in effect at `pc`; None when the page has no rows.
#[inline(always)]
fn rule(table_id: u32, pc: u32) -> Option<UnwindRule> {
    let key = PageKey {
        table_id,
        page: pc >> PAGE_SHIFT,
    };
    // SAFETY: the entry is copied out at once (a hash value may be removed after the lookup).
    let entry = unsafe { *UNWIND_PAGES.get_value_ptr_mut(0, &key)? };
    let block = UNWIND_ROWS.get_value(
        entry.block / ROW_CHUNK_BLOCKS,
        &(entry.block % ROW_CHUNK_BLOCKS),
    )?;
    let first = u32::from(entry.first);
    let at = |i: u32| block.rows.get(((first + i) & ROW_MASK) as usize).copied();
    let low = pc & ((1 << PAGE_SHIFT) - 1);
    // The first row of a page starts at the page's first address, so a row always applies.
    let index = last_at_or_below(u32::from(entry.count), u64::from(low), |i| {
        at(i).map_or(u64::MAX, |r| u64::from(r.pc_low))
    })?;
    UNWIND_RULES.get(u32::from(at(index)?.rule)).copied()
}
