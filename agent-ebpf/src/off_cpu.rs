//! Off-CPU time from `sched:sched_switch`: at switch-out the leaving thread's time and stacks are
//! remembered; at its next switch-in the elapsed time is added to the aggregation of those stacks.
//!
//! Which episodes count (chosen so waiting and queueing are never mixed in one number):
//! - voluntary (default): the thread left in S or D state, i.e. it blocked on something (sleep, lock, I/O);
//! - involuntary: the thread was preempted while runnable (state R, or R+), i.e. it waited for a CPU.
//!
//! Tasks leaving in other states (stopped, traced, parked, idle kernel threads, exiting) are not counted.
//! Field offsets of the tracepoint record come from tracefs at load time, as globals.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    programs::TracePointContext,
};
use sonde_abi::{OffCpuKind, OffCpuStart, SLOTS, STACK_STALE, stat};

use crate::{
    Failed, globals,
    maps::{OFFCPU_START, add_episode, bump, generation, off_cpu_counts, pid_listed},
    process, stack,
    unwind::regs,
};

/// This program's entry in `UNWIND_SCRATCH`.
const SCRATCH_SLOT: u32 = 1;

/// `prev_state` bits as the tracepoint reports them (`__trace_sched_switch_state`).
const STATE_SLEEPING: u64 = 0x1 | 0x2; // S, D
const STATE_EXITING: u64 = 0x10 | 0x20; // X, Z
const STATE_KNOWN: u64 = 0xff; // every reported state bit, below the "preempted" bit

/// Handles one context switch.
#[inline(always)]
pub fn switch(ctx: &TracePointContext) -> Result<(), Failed> {
    // SAFETY: offsets come from the tracepoint's format file and are within the record.
    let (prev_pid, prev_state, next_pid) = unsafe {
        (
            ctx.read_at::<i32>(globals::prev_pid_offset() as usize)
                .map_err(|_| Failed)?,
            ctx.read_at::<u64>(globals::prev_state_offset() as usize)
                .map_err(|_| Failed)?,
            ctx.read_at::<i32>(globals::next_pid_offset() as usize)
                .map_err(|_| Failed)?,
        )
    };
    let generation = generation().ok_or(Failed)?;
    // SAFETY: no preconditions; the helper reads the monotonic clock.
    let now = unsafe { bpf_ktime_get_ns() };
    if prev_pid > 0 && counted(prev_state) {
        switch_out(ctx, prev_pid as u32, generation, now);
    }
    if next_pid > 0 {
        switch_in(next_pid as u32, generation, now);
    }
    Ok(())
}

/// Whether a thread leaving in `state` starts an episode of the configured kind.
#[inline(always)]
fn counted(state: u64) -> bool {
    let preempted = state & globals::preempt_state_bit() != 0;
    if globals::offcpu_kind() == OffCpuKind::Involuntary as u32 {
        preempted || state & STATE_KNOWN == 0
    } else {
        !preempted && state & STATE_SLEEPING != 0 && state & STATE_EXITING == 0
    }
}

#[inline(always)]
fn switch_out(ctx: &TracePointContext, tid: u32, generation: u64, now: u64) {
    // The tracepoint runs in the context of the task leaving the CPU, so current == prev.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if globals::filter_pids() != 0 && !pid_listed(tgid) {
        return;
    }
    // sched_switch runs in the kernel: the kernel stack is here, the user registers were saved when
    // the task entered the kernel.
    let captured = stack::capture(
        ctx,
        tgid,
        generation,
        regs::current_task_user_regs(),
        true,
        SCRATCH_SLOT,
    );
    let start = OffCpuStart {
        start_ns: now,
        generation,
        key: captured.key,
    };
    if !captured.known_process {
        process::announce(tgid);
    }
    match OFFCPU_START.insert(tid, start, 0) {
        Ok(()) => bump(stat::OFFCPU_SWITCH_OUT),
        Err(_) => bump(stat::OFFCPU_START_FULL),
    }
}

#[inline(always)]
fn switch_in(tid: u32, generation: u64, now: u64) {
    let Some(start) = OFFCPU_START.get_ptr(tid) else {
        return;
    };
    // SAFETY: pointer from a successful lookup; copied before the entry is removed.
    let start = unsafe { *start };
    // The entry may already be gone if the thread exited meanwhile; nothing else to do then.
    if OFFCPU_START.remove(tid).is_err() {
        return;
    }
    let blocked = now.saturating_sub(start.start_ns);
    if blocked < globals::min_block_ns() {
        bump(stat::OFFCPU_SHORT);
        return;
    }
    let mut key = start.key;
    // Stack maps are recycled SLOTS-1 generations later; an episode older than that keeps its time only.
    if generation.wrapping_sub(start.generation) >= SLOTS - 1 {
        key.kernel_stack_id = STACK_STALE;
        key.user_stack_id = 0;
        key.user_stack_status = STACK_STALE;
        bump(stat::OFFCPU_STALE_STACK);
    }
    match add_episode(off_cpu_counts(generation % SLOTS), &key, blocked) {
        Ok(()) => bump(stat::OFFCPU_EPISODES),
        Err(_) => bump(stat::OFFCPU_MAP_FULL),
    }
}
