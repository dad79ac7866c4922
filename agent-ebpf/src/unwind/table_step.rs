//! The frame step with the process's tables, one global BPF function per walker (native, Java,
//! V8): the body of the table walk's `bpf_loop` callbacks (`super::with_tables` and its twins); and
//! the step with the mappings the kernel recorded, for a process userspace has not captured yet
//! (`super::with_vmas`).
//!
//! The frame steps are global BPF functions (exported, so their BTF says "global"): the verifier
//! checks a global function once, on its own, from its arguments' types, where it checks a static
//! one again at every call with the caller's state. Inside a `bpf_loop` callback that mattered: since
//! Linux 6.7 the verifier treats a callback's body as a loop and, until the loop converges, prunes a
//! path only when its values lie within those of a path already checked (not merely where they
//! matter), so the step's paths multiplied, once per distinct caller state and iteration. On Linux
//! 6.18 the native step took 430k instructions to verify (1-4 s of CPU at every start), the Java one
//! 731k (5-13 s before the first Java frame) and the V8 one passed the verifier's limit of 1M, so
//! Node.js frames were never walked. Their arguments are pointers to their types (the verifier gives
//! the function memory of that size, possibly null) and scalars: no pointer held in memory survives
//! into a global function.
//!
//! In the legacy object (Linux 5.10 to 6.0) they are static, called from global twins that take
//! scalars only (`super::steps`).

use sonde_abi::{
    ExecMapping, ProcMappings, VmaMappings,
    hotspot::HsProc,
    stat,
    unwind::{FRAME_EXACT, MAX_EXEC_MAPPINGS, file_frame},
    v8::V8Proc,
};

use super::{Scratch, files, hotspot, lookup, push_word, step, step::Flow, v8};
use crate::maps::VMA_MAPPINGS;

/// The native frame step (see the module's documentation).
#[cfg_attr(not(feature = "legacy"), unsafe(no_mangle), inline(never))]
// In the legacy object, part of its global twin: one frame fewer, as Linux 5.10 counts every
// frame of a call chain (each rounded up to 32 bytes) against the 512-byte stack.
#[cfg_attr(feature = "legacy", inline(always))]
pub extern "C" fn sonde_step_native(
    scratch: *mut Scratch,
    procs: *mut ProcMappings,
    tgid: u64,
) -> i64 {
    // SAFETY: null or the walk's scratch and process mappings, valid while the walk runs.
    match unsafe { (scratch.as_mut(), procs.as_mut()) } {
        (Some(s), Some(procs)) => table_step(s, procs, tgid as u32, None, None),
        _ => 1,
    }
}

/// The frame step of a JVM (see the module's documentation).
#[cfg_attr(not(feature = "legacy"), unsafe(no_mangle), inline(never))]
// In the legacy object, part of its global twin: one frame fewer, as Linux 5.10 counts every
// frame of a call chain (each rounded up to 32 bytes) against the 512-byte stack.
#[cfg_attr(feature = "legacy", inline(always))]
pub extern "C" fn sonde_step_java(
    scratch: *mut Scratch,
    procs: *mut ProcMappings,
    hs: *const HsProc,
    tgid: u64,
) -> i64 {
    // SAFETY: as `sonde_step_native`; `hs` null or the JVM's settings.
    match unsafe { (scratch.as_mut(), procs.as_mut(), hs.as_ref()) } {
        (Some(s), Some(procs), Some(hs)) => table_step(s, procs, tgid as u32, Some(hs), None),
        _ => 1,
    }
}

/// The frame step of a Node.js process (see the module's documentation).
#[cfg_attr(not(feature = "legacy"), unsafe(no_mangle), inline(never))]
// In the legacy object, part of its global twin: one frame fewer, as Linux 5.10 counts every
// frame of a call chain (each rounded up to 32 bytes) against the 512-byte stack.
#[cfg_attr(feature = "legacy", inline(always))]
pub extern "C" fn sonde_step_v8(
    scratch: *mut Scratch,
    procs: *mut ProcMappings,
    v8: *const V8Proc,
    tgid: u64,
) -> i64 {
    // SAFETY: as `sonde_step_native`; `v8` null or the process's V8 settings.
    match unsafe { (scratch.as_mut(), procs.as_mut(), v8.as_ref()) } {
        (Some(s), Some(procs), Some(v8)) => table_step(s, procs, tgid as u32, None, Some(v8)),
        _ => 1,
    }
}

/// The frame step of a process userspace has not captured, with the mappings the kernel recorded.
/// Frames in a binary with a table are stored file-relative (`FRAME_FILE`), so they are named even if
/// the process is gone before userspace reads its mappings. Global for the same reason as the others:
/// as a static function it was checked again for each of its caller's states (15,462 instructions).
#[cfg_attr(not(feature = "legacy"), unsafe(no_mangle))]
// The legacy object records no mappings (`super::steps`).
#[cfg_attr(feature = "legacy", allow(dead_code))]
#[inline(never)]
pub extern "C" fn sonde_step_vmas(scratch: *mut Scratch, vmas: *const VmaMappings) -> i64 {
    // SAFETY: null or the walk's scratch and the process's recorded mappings, valid while the walk
    // runs.
    let (Some(s), Some(vmas)) = (unsafe { (scratch.as_mut(), vmas.as_ref()) }) else {
        return 1;
    };
    let pc = s.regs.pc;
    let addr = step::lookup_address(s);
    let (m, file_id) = files::locate(s, vmas, addr);
    let found = m.table_id != 0;
    let word = located_word(s, pc, &m, file_id, found);
    store_and_step(s, word, &m, found, addr, stat::FALLBACK_NO_TABLE)
}

/// The stored word of a frame at `pc` located in the kernel's recorded mappings: file-relative
/// (`FRAME_FILE`) in a binary with a table, else the address itself.
#[inline(always)]
fn located_word(s: &Scratch, pc: u64, m: &ExecMapping, file_id: u32, found: bool) -> u64 {
    let raw = if s.exact != 0 { pc | FRAME_EXACT } else { pc };
    if found {
        file_frame(file_id, pc.wrapping_sub(m.bias), s.exact != 0).unwrap_or(raw)
    } else {
        raw
    }
}

/// Stores `word` and steps to the caller: by `m`'s rules when `mapped`, else by the fallback counted
/// under `no_info`. A `bpf_loop` callback's answer: 0 to go on, 1 to stop.
#[inline(always)]
fn store_and_step(
    s: &mut Scratch,
    word: u64,
    m: &ExecMapping,
    mapped: bool,
    addr: u64,
    no_info: u32,
) -> i64 {
    if !push_word(s, word) {
        return 1;
    }
    let flow = if mapped {
        step::with_mapping(s, m, addr)
    } else {
        step::no_info(s, no_info)
    };
    answer(flow)
}

/// A step's flow as a `bpf_loop` callback's answer.
#[inline(always)]
fn answer(flow: Flow) -> i64 {
    match flow {
        Flow::Continue => 0,
        Flow::Stop => 1,
    }
}

/// One frame with the process's tables, stepping Java frames with `hs` and JavaScript frames with
/// `v8` (each step passes one or neither, so the other runtime's code is not there to verify).
#[inline(always)]
fn table_step(
    s: &mut Scratch,
    procs: &mut ProcMappings,
    tgid: u32,
    hs: Option<&HsProc>,
    v8: Option<&V8Proc>,
) -> i64 {
    let pc = s.regs.pc;
    let addr = step::lookup_address(s);
    if let Some(hs) = hs {
        if let hotspot::Java::Stepped(flow) = hotspot::step(s, hs, addr) {
            return answer(flow);
        }
    }
    let raw = if s.exact != 0 { pc | FRAME_EXACT } else { pc };
    // The mapping as a value and whether there is one, not an `Option` (see `files::locate`).
    let (found, mapped, word) = match lookup::mapping(procs, addr, &mut s.mapping_hint) {
        Some(m) => (m, true, raw),
        None => {
            // Userspace's view is behind either way: it re-reads the mappings (and finds what they
            // hold, a shared libpython for instance).
            step::request_refresh(procs, tgid);
            let vmas = VMA_MAPPINGS.get_ptr(tgid);
            let (m, file_id) = match vmas {
                // SAFETY: a pointer from a successful lookup, read for this frame only.
                Some(vmas) => files::locate(s, unsafe { &*vmas }, addr),
                None => files::NONE,
            };
            let mapped = m.table_id != 0;
            // A return address in no executable mapping that userspace listed (all of them: the
            // list is not cut) nor that the kernel recorded since is no caller: a wrong rule was
            // taken (a row for another address, a stack changed under the walk). The walk ends
            // there, counted, rather than going on from a made-up frame. The leaf is where the
            // sample was taken, whatever maps it.
            // SAFETY: as above.
            let recorded = vmas.is_some_and(|v| files::contains(unsafe { &*v }, addr));
            if s.stack.len > 0 && !mapped && !recorded && (procs.count as usize) < MAX_EXEC_MAPPINGS
            {
                return answer(step::bad_frame(s));
            }
            let word = located_word(s, pc, &m, file_id, mapped);
            (m, mapped, word)
        }
    };
    if let Some(v8) = v8 {
        // Where the native step would fall back to frame pointers (V8's builtins and JIT code have
        // no unwind table), V8's own frame layout says more.
        let no_table = !mapped || found.table_id == 0;
        if let v8::V8::Stepped(flow) = v8::step(s, v8, addr, no_table) {
            return answer(flow);
        }
    }
    store_and_step(s, word, &found, mapped, addr, stat::FALLBACK_NO_INFO)
}
