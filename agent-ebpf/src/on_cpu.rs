//! On-CPU sampling: a perf cpu-clock event fires on every CPU at the configured frequency; each firing
//! adds one to the count of the interrupted task's (process, thread name, user stack, kernel stack).

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::PerfEventContext};
use sonde_abi::{SLOTS, stat};

use crate::{
    Failed, globals,
    maps::{add_sample, bump, generation, on_cpu_counts, pid_listed},
    process, stack,
    unwind::regs,
};

/// This program's entry in `UNWIND_SCRATCH`.
const SCRATCH_SLOT: u32 = 0;

/// Handles one cpu-clock sample.
#[inline(always)]
pub fn sample(ctx: &PerfEventContext) -> Result<(), Failed> {
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
    let generation = generation().ok_or(Failed::Control)?;
    // SAFETY: perf_event programs may read their context's saved registers.
    let interrupted = unsafe { &(*ctx.ctx).regs };
    let in_user_mode = regs::is_user_mode(interrupted.cs);
    let user = if in_user_mode {
        Some(regs::from_pt_regs(interrupted))
    } else {
        regs::current_task_user_regs()
    };
    let captured = stack::capture(
        ctx,
        tgid,
        generation,
        user,
        !in_user_mode,
        SCRATCH_SLOT,
        true,
    );
    if !captured.known_process {
        process::announce(tgid);
    }
    match add_sample(on_cpu_counts(generation % SLOTS), &captured.key) {
        Ok(()) => bump(stat::ONCPU_SAMPLES),
        Err(_) => bump(stat::ONCPU_MAP_FULL),
    }
    Ok(())
}
