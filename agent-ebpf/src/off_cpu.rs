//! Off-CPU time from `sched:sched_switch`: at switch-out the leaving thread's time and stacks are
//! remembered; at its next switch-in the elapsed time is added to the aggregation of those stacks.
//!
//! Which episodes count (chosen so waiting and queueing are never mixed in one number):
//! - voluntary (default): the thread left in S or D state, i.e. it blocked on something (sleep, lock, I/O);
//! - involuntary: the thread was preempted while runnable (state R, or R+), i.e. it waited for a CPU.
//!
//! Tasks leaving in other states (stopped, traced, parked, idle kernel threads, exiting) are not counted.
//! Field offsets of the tracepoint record come from tracefs at load time, as globals.
//!
//! Sampling (see `sonde_abi::OffCpuSampling`): a counted switch-out is tracked with the probability
//! userspace set for its process (a fair share of the budget), or for sure when the thread's last
//! tracked episode was long; the inverse probability goes into the key as the episode's weight. A
//! switch that is not tracked costs a random draw and three cache lines (the process's counter and
//! probability, the thread's slot), all in the attached program; a switch-in of a thread with
//! nothing pending costs one line. Only a tracked switch-out goes on to a walking program.

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_get_prandom_u32, bpf_ktime_get_ns},
    macros::map,
    maps::PerCpuArray,
    programs::TracePointContext,
};
use sonde_abi::{
    OffCpuKind, OffCpuStart, PROCESS_SLOTS, SLOTS, STACK_STALE, THREAD_SLOTS, ThreadSlot, stat,
};

use crate::{
    Failed, globals,
    maps::{
        OFFCPU_PROCESS_SAMPLING, OFFCPU_PROCESS_SWITCHES, OFFCPU_SAMPLING, OFFCPU_START,
        OFFCPU_THREADS, add, add_episode, atomic_add_u32, bump, generation, off_cpu_counts,
        pid_listed,
    },
    process, regs, stack,
};

/// This program's entry in `UNWIND_SCRATCH`.
const SCRATCH_SLOT: u32 = 1;

/// Where an episode's start is built before it goes into `OFFCPU_START` (see `switch_out`). Here
/// rather than in `maps.rs`: only this program uses it (its name is in `sonde_abi::names`).
#[map]
static OFFCPU_START_STAGING: PerCpuArray<OffCpuStart> = PerCpuArray::with_max_entries(1, 0);

/// `prev_state` bits as the tracepoint reports them (`__trace_sched_switch_state`).
const STATE_SLEEPING: u64 = 0x1 | 0x2; // S, D
const STATE_EXITING: u64 = 0x10 | 0x20; // X, Z
const STATE_KNOWN: u64 = 0xff; // every reported state bit, below the "preempted" bit

/// The attached program's part of a context switch, the same whatever the runtime: the entering
/// thread's episode ends, and the leaving thread's is drawn. Whether it is tracked: only then does
/// the switch go on to a walking program ([`track`]), picked by two process lookups and reached by a
/// tail call, which the 99% of switches a busy host does not track no longer pay for.
#[inline(always)]
pub fn switch(ctx: &TracePointContext) -> Result<bool, Failed> {
    let (prev_pid, prev_state, next_pid) = if globals::standard_layout() != 0 {
        standard_fields(ctx)
    } else {
        read_fields(ctx)?
    };
    if next_pid > 0 {
        switch_in(next_pid as u32)?;
    }
    if prev_pid > 0 && counted(prev_state) {
        return draw(prev_pid as u32);
    }
    Ok(false)
}

/// `sched_switch`'s `prev_pid`, `prev_state` and `next_pid` where every kernel since 4.x has them:
/// loaded straight from the context (one instruction each; the verifier wants constant offsets).
#[inline(always)]
fn standard_fields(ctx: &TracePointContext) -> (i32, u64, i32) {
    let record = ctx.as_ptr().cast::<u8>();
    // SAFETY: the agent selects this path only when the format file shows these offsets and sizes,
    // all within the record.
    unsafe {
        (
            *record.add(24).cast::<i32>(),
            *record.add(32).cast::<u64>(),
            *record.add(56).cast::<i32>(),
        )
    }
}

/// The three fields at the offsets the format file gave (checked at load to lie within the record),
/// one read each: a single read of the span holding them put 64 more bytes on a stack that the
/// verifier caps at 512 for the whole call chain (see `switch_in`).
#[inline(always)]
fn read_fields(ctx: &TracePointContext) -> Result<(i32, u64, i32), Failed> {
    // SAFETY (each read): the offsets lie within the tracepoint record; a failed read is returned.
    unsafe {
        Ok((
            ctx.read_at::<i32>(globals::prev_pid_offset() as usize)
                .map_err(Failed::ContextRead)?,
            ctx.read_at::<u64>(globals::prev_state_offset() as usize)
                .map_err(Failed::ContextRead)?,
            ctx.read_at::<i32>(globals::next_pid_offset() as usize)
                .map_err(Failed::ContextRead)?,
        ))
    }
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

/// The per-thread state slot of `tid`.
#[inline(always)]
fn thread_slot(tid: u32) -> Result<*mut ThreadSlot, Failed> {
    OFFCPU_THREADS
        .get_ptr_mut(tid % THREAD_SLOTS)
        .ok_or(Failed::ThreadSlot)
}

/// Whether the episode of `tid`, leaving the CPU, is tracked; if so its start and weight are staged
/// in this CPU's `OFFCPU_START_STAGING` entry for [`track`], tail-called next on the same CPU.
#[inline(always)]
fn draw(tid: u32) -> Result<bool, Failed> {
    // The tracepoint runs in the context of the task leaving the CPU, so current == prev.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if globals::filter_pids() != 0 && !pid_listed(tgid) {
        return Ok(false);
    }
    if !crate::targets::admit_switch(tgid) {
        return Ok(false);
    }
    bump(stat::OFFCPU_ELIGIBLE);
    let process = tgid % PROCESS_SLOTS;
    if let Some(switches) = OFFCPU_PROCESS_SWITCHES.get_ptr_mut(process) {
        // SAFETY: this CPU's slot of a live per-CPU array.
        unsafe { *switches += 1 };
    }
    let slot = thread_slot(tid)?;
    let sampling = OFFCPU_SAMPLING.get_ptr_mut(0).ok_or(Failed::Sampling)?;
    // SAFETY: pointers from successful lookups; the per-CPU settings are this CPU's alone while the
    // program runs (userspace replaces them whole between steps); the process's are copied.
    let (long, settings, own) = unsafe {
        (
            (*slot).long_tid == tid,
            *sampling,
            OFFCPU_PROCESS_SAMPLING
                .get(process)
                .copied()
                .unwrap_or_default(),
        )
    };
    let weight = if long {
        1
    } else {
        // The process's fair share of the budget; past this CPU's cap for the step (a storm that
        // began since userspace last looked), the CPU's rarer overflow draw.
        let (threshold, one_in) = if settings.tracked >= settings.cap {
            (settings.overflow_threshold, settings.overflow_one_in)
        } else if own.one_in > 0 {
            (own.threshold, own.one_in)
        } else {
            (settings.threshold, settings.one_in)
        };
        // SAFETY: no preconditions.
        if one_in > 1 && unsafe { bpf_get_prandom_u32() } > threshold {
            return Ok(false);
        }
        // SAFETY: as above.
        unsafe { (*sampling).tracked = settings.tracked.wrapping_add(1) };
        one_in
    };
    // The episode starts now: the stack walk below takes microseconds of the thread's switch-out
    // (tens with unwind tables), which are off-CPU time too, and a clock read after it undercounted
    // every tracked episode by that much.
    // Staged in this CPU's map memory rather than on the stack: the verifier caps a call chain's
    // stack at 512 bytes, and [`track`]'s frame sits under the walk's callback and the Java frame
    // step (320 bytes) on Linux 6.18, which counts the callback's chain.
    let staged = OFFCPU_START_STAGING
        .get_ptr_mut(0)
        .ok_or(Failed::Sampling)?;
    // SAFETY: this CPU's entry, used only by this program and the one it tail-calls.
    let start = unsafe { &mut *staged };
    // SAFETY: no preconditions; the helper reads the monotonic clock.
    start.start_ns = unsafe { bpf_ktime_get_ns() };
    start.key.weight = weight.min(u32::from(u16::MAX)) as u16;
    Ok(true)
}

/// In the walking program of `WALKER`'s runtime: the episode [`draw`] staged for the thread leaving
/// the CPU gets its stacks and is remembered until the thread's switch-in.
#[inline(always)]
pub fn track<const WALKER: u32>(ctx: &TracePointContext) -> Result<(), Failed> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tgid, tid) = ((pid_tgid >> 32) as u32, pid_tgid as u32);
    let slot = thread_slot(tid)?;
    let staged = OFFCPU_START_STAGING
        .get_ptr_mut(0)
        .ok_or(Failed::Sampling)?;
    // SAFETY: this CPU's entry, staged by the program that tail-called this one, until the insert
    // below copies it.
    let start = unsafe { &mut *staged };
    let weight = start.key.weight;
    let generation = generation().ok_or(Failed::Control)?;
    // sched_switch runs in the kernel: the kernel stack is here, the user registers were saved when
    // the task entered the kernel.
    let mut captured = stack::capture::<WALKER, _>(
        ctx,
        tgid,
        tid,
        generation,
        regs::current_task_user_regs(),
        true,
        SCRATCH_SLOT,
        false,
        crate::label_sources::of_sample::<WALKER>(tgid),
    );
    captured.key.weight = weight;
    if !captured.known_process {
        process::announce(tgid);
    }
    start.generation = generation;
    start.key = captured.key;
    match OFFCPU_START.insert(tid, &*start, 0) {
        Ok(()) => {
            // SAFETY: a pointer into the live array.
            unsafe { atomic_add_u32(&raw mut (*slot).pending, 1) };
            bump(stat::OFFCPU_SWITCH_OUT);
            add(stat::OFFCPU_WEIGHT, u64::from(captured.key.weight));
            // SAFETY: as above; a hint that another thread of the slot may have overwritten since
            // the draw, which only miscounts this statistic.
            if unsafe { (*slot).long_tid } == tid {
                bump(stat::OFFCPU_TRACKED_LONG);
            }
        }
        Err(_) => bump(stat::OFFCPU_START_FULL),
    }
    Ok(())
}

/// In the attached program, never under a walk: with its copies of the episode (its start and key)
/// in the frame of the walk's caller, the call chain's stack, which the verifier caps at 512 bytes
/// with the walk's `bpf_loop` callback included on Linux 6.18, reached 576.
#[inline(always)]
fn switch_in(tid: u32) -> Result<(), Failed> {
    let slot = thread_slot(tid)?;
    // SAFETY: a pointer into the live array; a stale read only costs a lookup or skips one that a
    // concurrent switch-out of another thread of the slot is about to need, never a tracked episode
    // of this thread (its switch-out happened before this switch-in).
    if unsafe { (*slot).pending } == 0 {
        return Ok(());
    }
    let Some(start) = OFFCPU_START.get_ptr(tid) else {
        return Ok(());
    };
    // SAFETY: pointer from a successful lookup; copied before the entry is removed.
    let start = unsafe { *start };
    // The entry may already be gone if the thread exited meanwhile; nothing else to do then.
    if OFFCPU_START.remove(tid).is_err() {
        return Ok(());
    }
    // SAFETY: as above; wrapping add of u32::MAX takes one off.
    unsafe { atomic_add_u32(&raw mut (*slot).pending, u32::MAX) };
    // SAFETY: no preconditions; the helper reads the monotonic clock.
    let blocked = unsafe { bpf_ktime_get_ns() }.saturating_sub(start.start_ns);
    // SAFETY: as above.
    let long_ns = unsafe { (*OFFCPU_SAMPLING.get_ptr(0).ok_or(Failed::Sampling)?).long_ns };
    // SAFETY: as above; the mark is a hint (another thread of the slot may overwrite it).
    unsafe {
        if long_ns > 0 && blocked >= long_ns {
            (*slot).long_tid = tid;
        } else if (*slot).long_tid == tid {
            (*slot).long_tid = 0;
        }
    }
    if blocked < globals::min_block_ns() {
        bump(stat::OFFCPU_SHORT);
        return Ok(());
    }
    let generation = generation().ok_or(Failed::Control)?;
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
    Ok(())
}

/// The exiting thread's tracked episode is dropped (counted): it never switches in again. Called by
/// `sched:sched_process_exit` before the process bookkeeping.
#[inline(always)]
pub fn forget_exiting_thread() {
    let tid = bpf_get_current_pid_tgid() as u32;
    if OFFCPU_START.remove(tid).is_ok() {
        bump(stat::OFFCPU_UNMATCHED_EXIT);
        if let Ok(slot) = thread_slot(tid) {
            // SAFETY: a pointer into the live array.
            unsafe { atomic_add_u32(&raw mut (*slot).pending, u32::MAX) };
        }
    }
}
