//! CPython frames: after the native walk, the sampled thread's Python frame chain, one word per frame
//! appended to the same stack (layout in `sonde_abi::python`). The interpreter's structures are found
//! through the settings userspace wrote for the process (`PY_PROCS`); their offsets differ per version,
//! so every field is read at an offset from those settings, never from a compiled-in struct.
//!
//! Frames and threads are walked in `bpf_loop`s (`crate::repeat`), as native frames are: the
//! verifier's work does not grow with the depth.

use core::ffi::c_void;

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user, generated};
use sonde_abi::{
    python::{
        FRAME_SPAN_MAX, MAX_THREADS, OFFSET_NONE, OWNED_BY_CSTACK, PY_ENTRY, PyProc, layout,
        pack_frame,
    },
    stat,
};

use super::Scratch;
use crate::{
    maps::{PY_PROCS, PY_THREADS, bump},
    repeat::repeat,
};

/// Per-CPU state of one Python walk (inside `Scratch`).
#[repr(C)]
pub struct PyWalk {
    /// The next frame to read (0: the chain ended).
    frame: u64,
    /// Python frames stored by this walk.
    frames: u32,
    /// Non-zero when the walk ended on unreadable memory.
    fault: u32,
    /// The process walked.
    tgid: u32,
    _pad: u32,
    /// The frame's first `frame_span` bytes.
    buf: [u8; FRAME_SPAN_MAX as usize],
}

/// What the frame callback gets.
#[repr(C)]
#[cfg(not(feature = "legacy"))]
struct FrameWalk {
    scratch: *mut Scratch,
    settings: *const PyProc,
}

/// What the thread-search callback gets.
#[repr(C)]
struct ThreadSearch {
    settings: *const PyProc,
    /// The thread state to look at next; the match once found.
    tstate: u64,
    /// The value `field` holds in the thread's state.
    key: u64,
    field: u32,
    found: u32,
}

/// Appends the Python frames of the current thread of `tgid`, when it runs a known interpreter, and
/// says how many.
/// `gil_holder_ok`: on versions without native thread ids, the GIL holder may stand for the current
/// thread (true on-CPU, where a thread running Python holds the GIL; false off-CPU, where the thread
/// released it to block).
/// `scratch` is a raw pointer, not a `&mut` argument: the legacy object's frame loop writes the
/// scratch entry through a pointer of its own, which a `&mut` argument would let the compiler
/// assume it does not (and read stale values after the loop).
#[inline(always)]
pub fn walk(scratch: *mut Scratch, slot: u32, tgid: u32, gil_holder_ok: bool) -> u32 {
    let Some(settings) = PY_PROCS.get_ptr(tgid) else {
        return 0;
    };
    // SAFETY: the walk's scratch entry, this program's alone while it runs.
    let s = unsafe { &mut *scratch };
    bump(stat::PY_WALKS);
    // SAFETY: a pointer from a successful lookup, valid for this program run.
    let p = unsafe { &*settings };
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(tstate) = thread_state(p, settings, tgid, tid, gil_holder_ok) else {
        bump(stat::PY_NO_THREAD);
        return 0;
    };
    let Some(mut frame) = read_u64(tstate, p.tstate_frame) else {
        bump(stat::PY_READ_FAULT);
        return 0;
    };
    if p.cframe_current != OFFSET_NONE && frame != 0 {
        let Some(current) = read_u64(frame, p.cframe_current) else {
            bump(stat::PY_READ_FAULT);
            return 0;
        };
        frame = current;
    }
    if frame == 0 {
        bump(stat::PY_IDLE);
        return 0;
    }
    s.py.frame = frame;
    s.py.frames = 0;
    s.py.fault = 0;
    s.py.tgid = tgid;
    frames(scratch, settings, slot, tgid);
    // SAFETY: the loop is over; `s` is ours again.
    let s = unsafe { &mut *scratch };
    crate::maps::add(stat::PY_FRAMES, u64::from(s.py.frames));
    if s.py.fault != 0 {
        bump(stat::PY_READ_FAULT);
    } else if s.py.frame != 0 {
        bump(stat::PY_TRUNCATED);
    }
    if s.py.fault != 0 || s.py.frame != 0 {
        super::unflag_last(s, s.py.frames, PY_ENTRY);
    }
    s.py.frames
}

/// How the sampled thread's state is recognised among the interpreter's: the field compared, and the
/// value it must hold.
#[inline(always)]
fn thread_key(p: &PyProc, tid: u32) -> Option<(u16, u64)> {
    if p.tstate_native_tid != OFFSET_NONE {
        return Some((p.tstate_native_tid, u64::from(tid)));
    }
    if p.tstate_pthread == OFFSET_NONE {
        return None;
    }
    // x86_64: glibc's pthread_self() is the thread's fs base.
    let fsbase = crate::regs::thread_pointer().ok()?;
    (fsbase != 0).then_some((p.tstate_pthread, fsbase))
}

/// The thread state of the current thread: the cached one if it still names the thread, else found
/// among the interpreter's threads (and cached); without a way to recognise it, the GIL holder when
/// `gil_holder_ok`.
#[inline(always)]
fn thread_state(
    p: &PyProc,
    settings: *const PyProc,
    tgid: u32,
    tid: u32,
    gil_holder_ok: bool,
) -> Option<u64> {
    let Some((field, key)) = thread_key(p, tid) else {
        if !gil_holder_ok || p.gil_tstate == 0 {
            return None;
        }
        // SAFETY: a user address; a fault makes the helper fail.
        let holder = unsafe { bpf_probe_read_user(p.gil_tstate as *const u64) }.ok()?;
        return (holder != 0).then_some(holder);
    };
    if let Some(cached) = PY_THREADS.get_ptr(tid) {
        // SAFETY: a pointer from a successful lookup.
        let cached = unsafe { *cached };
        if read_u64(cached, field) == Some(key) {
            return Some(cached);
        }
    }
    // SAFETY: as above.
    let interp = unsafe { bpf_probe_read_user(p.interp_head as *const u64) }.ok()?;
    let first = read_u64(interp, p.interp_threads_head)?;
    #[cfg(not(feature = "legacy"))]
    let found = {
        let _ = tgid;
        find_thread(settings, first, key, u32::from(field))
    };
    #[cfg(feature = "legacy")]
    let found = {
        let _ = settings;
        legacy::sonde_legacy_find_thread(u64::from(tgid), first, key, u64::from(field))
    };
    if found == 0 {
        return None;
    }
    let _ = PY_THREADS.insert(tid, found, 0);
    Some(found)
}

/// The thread state whose `field` holds `key` in the interpreter's list from `first`; 0 if none.
#[inline(always)]
fn find_thread(settings: *const PyProc, first: u64, key: u64, field: u32) -> u64 {
    let mut search = ThreadSearch {
        settings,
        tstate: first,
        key,
        field,
        found: 0,
    };
    repeat(MAX_THREADS, next_thread, (&raw mut search).cast());
    match search.found {
        0 => 0,
        _ => search.tstate,
    }
}

/// The frame loop: [`sonde_step_python`] until it says stop (see `super::steps` for the legacy
/// object's).
#[inline(always)]
fn frames(scratch: *mut Scratch, settings: *const PyProc, slot: u32, tgid: u32) {
    #[cfg(not(feature = "legacy"))]
    {
        let _ = (slot, tgid);
        let mut walk = FrameWalk { scratch, settings };
        repeat(
            sonde_abi::MAX_STACK_DEPTH as u32,
            python_frame,
            (&raw mut walk).cast(),
        );
    }
    #[cfg(feature = "legacy")]
    {
        let _ = (scratch, settings);
        legacy::sonde_legacy_walk_python(u64::from(slot), u64::from(tgid));
    }
}

/// `bpf_loop` callback: one thread state of the interpreter's list.
#[inline(never)]
extern "C" fn next_thread(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `ThreadSearch` passed by `thread_state`.
    let (search, p) = unsafe {
        let search = &mut *ctx.cast::<ThreadSearch>();
        let p = &*search.settings;
        (search, p)
    };
    if search.tstate == 0 {
        return 1;
    }
    if read_u64(search.tstate, search.field as u16) == Some(search.key) {
        search.found = 1;
        return 1;
    }
    match read_u64(search.tstate, p.tstate_next) {
        Some(next) => {
            search.tstate = next;
            0
        }
        None => 1,
    }
}

/// `bpf_loop` callback: one Python frame.
#[cfg(not(feature = "legacy"))]
#[inline(never)]
extern "C" fn python_frame(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `FrameWalk` passed by `frames`; both pointers are live for the loop.
    let walk = unsafe { &*ctx.cast::<FrameWalk>() };
    super::loop_flow(walk.scratch, sonde_step_python(walk.scratch, walk.settings))
}

/// The legacy object's loops, global functions taking scalars (see `super::steps`).
#[cfg(feature = "legacy")]
mod legacy {
    use sonde_abi::{MAX_STACK_DEPTH, python::PyProc};

    use super::super::{Scratch, UNWIND_SCRATCH, loop_flow};
    use super::{find_thread, sonde_step_python};
    use crate::maps::PY_PROCS;

    #[inline(always)]
    fn memory(slot: u64, tgid: u64) -> (*mut Scratch, *const PyProc) {
        let scratch = UNWIND_SCRATCH
            .get_ptr_mut(slot as u32)
            .unwrap_or(core::ptr::null_mut());
        let settings = PY_PROCS.get_ptr(tgid as u32).unwrap_or(core::ptr::null());
        (scratch, settings)
    }

    /// The frame loop.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_walk_python(slot: u64, tgid: u64) -> i64 {
        let Some(scratch) = UNWIND_SCRATCH.get_ptr_mut(slot as u32) else {
            return 0;
        };
        for _ in 0..MAX_STACK_DEPTH {
            if loop_flow(scratch, sonde_legacy_step_python(slot, tgid)) != 0 {
                break;
            }
        }
        0
    }

    /// `sonde_step_python`, from the scratch slot and the tgid.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_step_python(slot: u64, tgid: u64) -> i64 {
        let (scratch, settings) = memory(slot, tgid);
        sonde_step_python(scratch, settings)
    }

    /// `find_thread`, from the tgid.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_find_thread(tgid: u64, first: u64, key: u64, field: u64) -> u64 {
        match PY_PROCS.get_ptr(tgid as u32) {
            Some(settings) => find_thread(settings, first, key, field as u32),
            None => 0,
        }
    }
}

/// One Python frame: a global BPF function, checked once on its own (see `super::table_step`); as
/// the callback's static body it was checked again for each state of its caller (9,096 instructions
/// of the native program's).
#[cfg_attr(not(feature = "legacy"), unsafe(no_mangle), inline(never))]
// In the legacy object, part of its global twin: one frame fewer, as Linux 5.10 counts every
// frame of a call chain (each rounded up to 32 bytes) against the 512-byte stack.
#[cfg_attr(feature = "legacy", inline(always))]
pub extern "C" fn sonde_step_python(scratch: *mut Scratch, settings: *const PyProc) -> i64 {
    // SAFETY: null or the walk's scratch and the process's settings, valid while the walk runs.
    let (Some(s), Some(p)) = (unsafe { (scratch.as_mut(), settings.as_ref()) }) else {
        return 1;
    };
    let frame = s.py.frame;
    if frame == 0 {
        return 1;
    }
    // A mask the verifier can bound the helper's size with; the range check below is the real one.
    let span = p.frame_span & (2 * FRAME_SPAN_MAX - 1);
    if span == 0 || span > FRAME_SPAN_MAX {
        s.py.fault = 1;
        return 1;
    }
    // SAFETY: `span` bytes fit in `buf`; a fault makes the helper fail, which is handled.
    let read = unsafe {
        generated::bpf_probe_read_user(s.py.buf.as_mut_ptr().cast(), span, frame as *const c_void)
    };
    if read != 0 {
        s.py.fault = 1;
        return 1;
    }
    let (Some(code), Some(previous)) = (
        buf_u64(&s.py.buf, p.frame_code),
        buf_u64(&s.py.buf, p.frame_previous),
    ) else {
        s.py.fault = 1;
        return 1;
    };
    s.py.frame = previous;
    let (instr, entry) = match p.layout {
        layout::FRAME_OBJECT => {
            let lasti = buf_u32(&s.py.buf, p.frame_instr).unwrap_or(0) as i32;
            (lasti.max(0) as u64, true)
        }
        layout::INTERP_FRAME_IS_ENTRY => (
            code_units(&s.py.buf, p, code),
            buf_u8(&s.py.buf, p.frame_entry).unwrap_or(0) != 0,
        ),
        _ => {
            if buf_u8(&s.py.buf, p.frame_entry) == Some(OWNED_BY_CSTACK) {
                // The evaluation loop's entry shim: the frame stored last was its call's first.
                mark_entry(s);
                return 0;
            }
            (code_units(&s.py.buf, p, code), false)
        }
    };
    if code == 0 {
        return 0;
    }
    let word = pack_frame(code, instr, entry);
    if !super::store(s, word, word) {
        // Full: the walk stops here with frames left (counted as truncated).
        s.py.frame = frame;
        return 1;
    }
    s.py.frames += 1;
    // Code objects live in the process's memory: a process that exits before its window is
    // drained would otherwise leave its Python frames unnamed.
    let object = super::announce::Object {
        address: code,
        check: 0,
        tgid: s.py.tgid,
    };
    if super::announce::first_time(&mut s.announced, object) {
        // The strings, read while the code surely lives: userspace reads the object later, and a
        // module's code is freed once it ran, its name string often with it.
        let name = code_field(code, p.code_name);
        let file = code_field(code, p.code_filename);
        crate::maps::send_python_code(s.py.tgid, code, name, file);
    }
    0
}

/// The pointer at `offset` in the code object at `code`, or 0 (no offset, or unreadable).
#[inline(always)]
fn code_field(code: u64, offset: u16) -> u64 {
    if offset == OFFSET_NONE {
        return 0;
    }
    // SAFETY: a user-memory read the helper checks; a fault gives 0.
    unsafe { bpf_probe_read_user((code + u64::from(offset)) as *const u64) }.unwrap_or(0)
}

/// Flags the last stored Python frame as its evaluation call's first (3.12+, where the call's end is
/// only seen at the next frame).
#[inline(always)]
fn mark_entry(s: &mut Scratch) {
    if s.py.frames > 0 {
        super::flag_last(s, PY_ENTRY);
    }
}

/// The instruction of a 3.11+ frame, in code units from the start of its code's bytecode.
#[inline(always)]
fn code_units(buf: &[u8; FRAME_SPAN_MAX as usize], p: &PyProc, code: u64) -> u64 {
    let Some(ptr) = buf_u64(buf, p.frame_instr) else {
        return 0;
    };
    let start = code.wrapping_add(u64::from(p.code_bytecode));
    if p.code_bytecode == OFFSET_NONE || ptr < start {
        return 0;
    }
    (ptr - start) >> 1
}

/// The word at `base + offset` in the process; None when unreadable or the offset does not exist.
#[inline(always)]
fn read_u64(base: u64, offset: u16) -> Option<u64> {
    if offset == OFFSET_NONE || base == 0 {
        return None;
    }
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    unsafe { bpf_probe_read_user((base + u64::from(offset)) as *const u64) }.ok()
}

#[inline(always)]
fn buf_u64(buf: &[u8; FRAME_SPAN_MAX as usize], offset: u16) -> Option<u64> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

#[inline(always)]
fn buf_u32(buf: &[u8; FRAME_SPAN_MAX as usize], offset: u16) -> Option<u32> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 4)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

#[inline(always)]
fn buf_u8(buf: &[u8; FRAME_SPAN_MAX as usize], offset: u16) -> Option<u8> {
    buf.get(usize::from(offset)).copied()
}
