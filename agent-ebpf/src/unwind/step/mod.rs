//! One frame of a user-stack walk: find the caller's pc, sp and frame pointer, by the binary's table
//! rule or by frame pointer. How a rule or a frame record reads is the architecture's, one module
//! each (chosen by the eBPF build's `bpf_target_arch`).

#[cfg(bpf_target_arch = "aarch64")]
mod aarch64;
#[cfg(bpf_target_arch = "x86_64")]
mod x86_64;

#[cfg(bpf_target_arch = "aarch64")]
pub use aarch64::USER_LIMIT;
#[cfg(bpf_target_arch = "aarch64")]
use aarch64::{apply, code_address};
#[cfg(bpf_target_arch = "x86_64")]
pub use x86_64::USER_LIMIT;
#[cfg(bpf_target_arch = "x86_64")]
use x86_64::{apply, code_address};

use aya_ebpf::helpers::bpf_ktime_get_ns;
use sonde_abi::{
    ExecMapping, ProcEvent, ProcMappings, proc_event, stat,
    unwind::{MAPPING_AT_ADDRESS, MAPPING_NO_UNWIND_INFO, MAPPING_RULE, mode, outcome, with_exact},
};

use super::{Scratch, lookup};
use crate::{
    globals,
    maps::{bump, send_proc_event},
};

/// Whether the walk goes on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Unwind the next frame.
    Continue,
    /// The walk ended; `Scratch::stack.outcome` says how.
    Stop,
}

/// Covers every index of `UserStack::frames` (`MAX_STACK_DEPTH`, a power of two).
pub(super) const FRAME_INDEX_MASK: u32 = sonde_abi::MAX_STACK_DEPTH as u32 - 1;

/// Ends the walk at a frame that cannot be a caller (`BAD_FRAME`).
#[inline(always)]
pub fn bad_frame(s: &mut Scratch) -> Flow {
    stop(s, outcome::BAD_FRAME)
}

#[inline(always)]
fn stop(s: &mut Scratch, why: u32) -> Flow {
    s.stack.outcome = why;
    Flow::Stop
}

/// The address whose rule applies to the current frame: a return address points after the call, so
/// the call itself (a call can be the last instruction of a function). The leaf and the frame after a
/// signal are exact.
#[inline(always)]
pub fn lookup_address(s: &Scratch) -> u64 {
    let pc = s.regs.pc;
    if s.exact != 0 { pc } else { pc.wrapping_sub(1) }
}

/// One frame at `addr` in mapping `m`.
#[inline(always)]
pub fn with_mapping(s: &mut Scratch, m: &ExecMapping, addr: u64) -> Flow {
    // JIT code with a frame of its own fixed shape: its one rule (`MAPPING_RULE`).
    if m.flags & MAPPING_RULE != 0 {
        return match lookup::rule_at(m.bias) {
            Some(rule) => apply(s, rule),
            None => no_info(s, stat::FALLBACK_NO_INFO),
        };
    }
    if m.table_id == 0 {
        return if m.flags & MAPPING_NO_UNWIND_INFO != 0 {
            no_info(s, stat::FALLBACK_NO_INFO)
        } else {
            no_info(s, stat::FALLBACK_NO_TABLE)
        };
    }
    // JIT code on its loop's frame: the loop's rule, wherever in the code (`MAPPING_AT_ADDRESS`).
    let at = if m.flags & MAPPING_AT_ADDRESS != 0 {
        m.bias
    } else {
        addr.wrapping_sub(m.bias)
    };
    match lookup::rule_cached(&mut s.rows, m.table_id, at) {
        Some(rule) => apply(s, rule),
        None => no_info(s, stat::FALLBACK_NO_INFO),
    }
}

/// No rule for this frame: step by frame pointer (`auto`), or end the walk (`tables`).
#[inline(always)]
pub fn no_info(s: &mut Scratch, counter: u32) -> Flow {
    if globals::unwind_mode() == mode::TABLES {
        return stop(s, outcome::NO_TABLE);
    }
    bump(counter);
    frame_pointer(s)
}

/// One frame by frame pointer: the frame record `[saved frame pointer, return address]` at it (rbp's
/// on x86_64, x29's on AArch64).
#[inline(always)]
pub fn frame_pointer(s: &mut Scratch) -> Flow {
    let bp = s.regs.bp;
    if bp == 0 || s.bp_lost != 0 {
        return stop(s, outcome::FP_END);
    }
    // A frame record lies above the stack pointer; below it, the register is not a frame pointer,
    // except once: Go's `runtime.systemstack` (and `mcall`) run a function on the thread's g0 stack
    // with the frame pointer still in the goroutine's stack, whose frames go on to
    // `runtime.goexit` (and Go on arm64 keeps its records 8 bytes below sp). One crossing per walk
    // keeps that chain whole; a second backward jump is a bad frame.
    if bp < s.regs.sp {
        if s.stack_switched != 0 {
            return stop(s, outcome::BAD_FRAME);
        }
        s.stack_switched = 1;
    }
    let Some([saved_bp, return_address]) = s.window.pair(bp) else {
        return stop(s, outcome::READ_FAULT);
    };
    let return_address = code_address(return_address);
    if return_address == 0 {
        return stop(s, outcome::FP_END);
    }
    if return_address >= USER_LIMIT {
        return stop(s, outcome::BAD_FRAME);
    }
    // The caller's sp is past the record: exactly so on x86_64; on AArch64 the record is at the
    // bottom of the callee's frame, which is all the next record's check needs.
    s.regs.sp = bp + 16;
    s.regs.bp = saved_bp;
    s.regs.pc = return_address;
    s.exact = 0;
    Flow::Continue
}

/// Marks the frame just pushed, a signal trampoline's, as looked up at its pc: the handler
/// "returned" to the trampoline's first instruction, whose rule (and symbol) is there, not one byte
/// before. The mask keeps the index provably inside the scratch value for the verifier (the walk
/// pushed this frame, so the length is at least 1).
#[inline(always)]
fn mark_trampoline_exact(s: &mut Scratch) {
    let last = (s.stack.len.wrapping_sub(1) & FRAME_INDEX_MASK) as usize;
    if let Some(frame) = s.stack.frames.get_mut(last) {
        *frame = with_exact(*frame);
    }
}

/// Asks userspace to read the process's mappings again, at most once per refresh interval.
#[inline(always)]
pub fn request_refresh(procs: &mut ProcMappings, tgid: u32) {
    // SAFETY: no preconditions; the helper reads the monotonic clock.
    let now = unsafe { bpf_ktime_get_ns() };
    if now.wrapping_sub(procs.refresh_requested_ns) < globals::refresh_interval_ns() {
        return;
    }
    procs.refresh_requested_ns = now;
    bump(stat::MAPPINGS_REFRESH);
    // A lost request is counted (`PROC_EVENTS_LOST`) and not logged: this is the unwinder.
    let _ = send_proc_event(&ProcEvent {
        kind: proc_event::MAPPINGS_STALE,
        tgid,
        time_ns: now,
        address: 0,
        data: 0,
        extra: 0,
    });
}
