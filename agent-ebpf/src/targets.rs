//! The relabel rules' decision, applied before anything else a sample costs: a process the rules
//! drop is filtered with one hash lookup (no stack taken, no walk, no aggregation), and a process
//! sampled below the base frequency keeps only its share of the base rate's samples. Userspace
//! writes `TARGETS` (`agent/src/targets/`); a process without an entry is sampled at the base rate.

use sonde_abi::{TARGET_KEEP_ALL, TARGET_SLOTS, stat};

use crate::maps::{TARGET_CREDIT, TARGETS, bump};

/// Whether an on-CPU sample of `tgid` is taken; a sample that is not is counted by reason.
#[inline(always)]
pub fn admit_sample(tgid: u32) -> bool {
    // SAFETY: a copy of the value of a successful lookup.
    let Some(rule) = (unsafe { TARGETS.get(&tgid) }).copied() else {
        return true;
    };
    if rule.keep == 0 {
        bump(stat::TARGET_DROPPED);
        return false;
    }
    if rule.keep >= TARGET_KEEP_ALL {
        return true;
    }
    // Credit: each sample adds the target's share; a sample that brings the credit to a whole
    // sample is kept and pays for it. Per CPU (no atomics, no cache line shared between CPUs), so
    // each CPU keeps its share exactly, within one sample.
    let Some(credit) = TARGET_CREDIT.get_ptr_mut(tgid % TARGET_SLOTS) else {
        return true;
    };
    // SAFETY: this CPU's slot of a live per-CPU array; a perf event does not nest within itself
    // on one CPU.
    unsafe {
        let next = *credit + rule.keep;
        if next >= TARGET_KEEP_ALL {
            *credit = next - TARGET_KEEP_ALL;
            true
        } else {
            *credit = next;
            bump(stat::TARGET_THINNED);
            false
        }
    }
}

/// Whether an off-CPU switch-out of `tgid` may be tracked: not when the rules drop the process
/// (off-CPU time has no frequency to thin).
#[inline(always)]
pub fn admit_switch(tgid: u32) -> bool {
    // SAFETY: a copy of the value of a successful lookup.
    match unsafe { TARGETS.get(&tgid) } {
        Some(rule) if rule.keep == 0 => {
            bump(stat::TARGET_OFFCPU_DROPPED);
            false
        }
        _ => true,
    }
}
