//! On-CPU sampling: a perf cpu-clock event fires on every CPU at the configured frequency; each firing
//! adds one to the count of the interrupted task's (process, thread name, user stack, kernel stack).

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::PerfEventContext};
use sonde_abi::{SLOTS, stat};

use crate::{
    maps::{add_sample, bump, control, on_cpu_counts, wanted},
    process, stack,
};

/// Handles one cpu-clock sample.
#[inline(always)]
pub fn sample(ctx: &PerfEventContext) -> Result<(), i32> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    if tid == 0 {
        // The idle task: the CPU had nothing to run. Counted, not profiled.
        bump(stat::ONCPU_IDLE);
        return Ok(());
    }
    let control = control().ok_or(-1)?;
    if !wanted(&control, tgid) {
        return Ok(());
    }
    let generation = control.generation;
    // SAFETY: perf_event programs may read their context's saved registers.
    let cs = unsafe { (*ctx.ctx).regs.cs };
    let key = stack::capture(ctx, tgid, generation, cs & 3 == 3);
    process::announce(tgid);
    match add_sample(on_cpu_counts(generation % SLOTS), &key) {
        Ok(()) => bump(stat::ONCPU_SAMPLES),
        Err(_) => bump(stat::ONCPU_MAP_FULL),
    }
    Ok(())
}
