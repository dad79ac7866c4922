//! On-CPU sampling: a perf cpu-clock event fires on every CPU at the configured frequency; each firing
//! adds one to the count of the interrupted task's (process, thread name, user stack, kernel stack).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    programs::PerfEventContext,
};
use sonde_abi::{SLOTS, cost_path, stat};

use crate::{
    Failed, globals,
    maps::{add_sample, bump, charge_sample, generation, on_cpu_counts, pid_listed, sample_count},
    process, regs, stack,
};

/// This program's entry in `UNWIND_SCRATCH`.
const SCRATCH_SLOT: u32 = 0;

/// Handles one cpu-clock sample, walking native frames and those of `WALKER`'s runtime
/// (`runtime::walker`).
#[inline(always)]
pub fn sample<const WALKER: u32>(ctx: &PerfEventContext) -> Result<(), Failed> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    if tid == 0 {
        // The idle task: the CPU had nothing to run. Counted, not profiled.
        bump(stat::ONCPU_IDLE);
        return Ok(());
    }
    if globals::filter_pids() != 0 && !pid_listed(tgid) {
        return Ok(());
    }
    // Timed from here, in the walking program (the dispatch before it is a few lookups).
    let began = timed_start();
    let generation = generation().ok_or(Failed::Control)?;
    let labels = crate::label_sources::of_sample::<WALKER>(tgid);
    // SAFETY: perf_event programs may read their context's saved registers.
    let interrupted = unsafe { &(*ctx.ctx).regs };
    let in_user_mode = regs::is_user_mode(interrupted);
    let user = if in_user_mode {
        Some(regs::from_pt_regs(interrupted))
    } else {
        regs::current_task_user_regs()
    };
    let captured = stack::capture::<WALKER, _>(
        ctx,
        tgid,
        tid,
        generation,
        user,
        !in_user_mode,
        SCRATCH_SLOT,
        true,
        labels,
    );
    if !captured.known_process {
        process::announce(tgid);
    }
    match add_sample(on_cpu_counts(generation % SLOTS), &captured.key) {
        Ok(()) => bump(stat::ONCPU_SAMPLES),
        Err(_) => bump(stat::ONCPU_MAP_FULL),
    }
    if began != 0 {
        // SAFETY: no preconditions; the helper reads the monotonic clock.
        charge_sample(
            captured.path,
            unsafe { bpf_ktime_get_ns() }.wrapping_sub(began),
        );
    }
    Ok(())
}

/// The clock at the start of one run in `cost_path::TIMED_EVERY` of this CPU's recorded samples, 0 for
/// the others: two clock reads cost ~50 ns on most hosts but ~700 ns where every kernel return goes
/// through a mitigation thunk, too much to pay on every sample for a figure a sample of them gives.
#[inline(always)]
fn timed_start() -> u64 {
    if sample_count() % cost_path::TIMED_EVERY != 0 {
        return 0;
    }
    // SAFETY: no preconditions; the helper reads the monotonic clock.
    unsafe { bpf_ktime_get_ns() }
}
