//! JavaScript frames of Node.js (V8), stepped in place among native frames. V8's generated code has no
//! unwind tables, but always keeps a frame pointer, and every frame it builds says what it is in
//! fixed slots below rbp (`sonde_abi::v8::V8Proc`, from `node`'s own `v8dbg_*` constants):
//! - a frame type marker (a Smi-tagged small integer: entry, exit, stub, builtin, internal and
//!   construct frames), stored with the pc ([`kind::MARKER`]);
//! - or the `JSFunction` it runs: its `SharedFunctionInfo` names the function, and its current
//!   `Code` says how: the interpreter (the frame's bytecode offset slot holds a Smi:
//!   [`kind::BYTECODE`]) or compiled code holding the pc ([`kind::CODE`], with the pc's offset);
//!   otherwise the function alone ([`kind::FUNCTION`]).
//!
//! The step is tried where the native walk would have fallen back to frame pointers anyway (a pc in
//! the embedded builtins, or in code no mapping holds a table for: V8's JIT code is anonymous
//! memory). What does not look like a V8 frame (rbp is no frame pointer there, its slots are not a
//! marker nor a `JSFunction`) is left to that native step, so a wrong guess costs a few reads, never
//! a frame. Every object read is checked by its map's instance type before it is trusted; userspace
//! checks it again when it names the frame (the garbage collector moves objects).
//!
//! Every rule here is x86_64's (the frame record at rbp, pointer tagging of 64-bit V8 without pointer
//! compression, as Node.js builds it).

use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use sonde_abi::{
    runtime_frame, stat,
    v8::{
        FRAME_SPAN, MAX_BUILTIN_RANGES, MAX_FRAME_SIZE, MAX_FRAME_TYPE, OBJECT_SPAN, V8Proc,
        code_check, kind, sfi_check,
    },
};

use super::{
    Scratch, mix, push_word,
    step::{Flow, USER_LIMIT},
};
use crate::maps::bump;

/// V8's heap object pointers carry tag 1 in their low two bits (`kHeapObjectTag`); Smis end in 0.
const HEAP_OBJECT_TAG: u64 = 1;
const HEAP_OBJECT_TAG_MASK: u64 = 3;
/// Words read at rbp: the frame slots below it, the saved rbp and the return address.
const FRAME_WORDS: usize = FRAME_SPAN as usize / 8 + 2;
const _: () = assert!(FRAME_WORDS.is_power_of_two());
const OBJECT_BYTES: usize = OBJECT_SPAN as usize;

/// Functions remembered per CPU with what their objects said (direct-mapped by hash).
const FUNCTION_CACHE_SLOTS: usize = 64;

/// Per-CPU memory of the V8 steps of one walk (inside `Scratch`), and what this CPU's earlier walks
/// resolved functions to.
#[repr(C)]
pub struct V8Walk {
    /// The heap object being read (`JSFunction`, `SharedFunctionInfo`, `Code`), its first bytes.
    object: [u8; OBJECT_BYTES],
    /// The frame being stepped: the slots below rbp, the saved rbp and the return address.
    frame: [u64; FRAME_WORDS],
    /// V8 frames stored by this walk.
    pub frames: u32,
    /// The process walked.
    tgid: u32,
    functions: [Resolved; FUNCTION_CACHE_SLOTS],
}

/// What a `JSFunction`'s `SharedFunctionInfo` and `Code` said when this CPU last read them, valid
/// while the function still points at both. A hot function runs again and again: with this, its frame
/// costs two reads (the frame, the function) instead of seven (each object and its map's type). The
/// objects may have moved since: the frame carries the check read then, which userspace compares with
/// what the address holds when it names the frame, as it does for every frame.
#[repr(C)]
#[derive(Clone, Copy)]
struct Resolved {
    /// The `JSFunction`, `SharedFunctionInfo` and `Code` (tagged), and the process: the key.
    function: u64,
    sfi: u64,
    code: u64,
    tgid: u32,
    /// The `SharedFunctionInfo`'s check (`sfi_check`).
    check: u32,
    /// Compiled code's instruction start and size ([`Code::Compiled`]).
    start: u64,
    size: u32,
    /// A [`Code`].
    code_class: u32,
}

/// What runs a function, as far as naming its frame goes.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Code {
    /// No readable `Code`, or Sparkplug's: the function alone names the frame.
    FunctionOnly = 0,
    /// The interpreter: the frame's bytecode offset says where.
    Interpreted = 1,
    /// Maglev or TurboFan code: the pc's offset in it says where.
    Compiled = 2,
}

impl V8Walk {
    /// Forgets the previous walk.
    #[inline(always)]
    pub fn reset(&mut self, tgid: u32) {
        self.frames = 0;
        self.tgid = tgid;
    }
}

/// What one V8 step did.
pub enum V8 {
    /// Not a V8 frame: the native step applies.
    NotV8,
    /// The frame was stored and stepped (or the walk ended, with its outcome set).
    Stepped(Flow),
}

/// Whether `addr` lies in the embedded builtins as the process maps them.
#[inline(always)]
fn in_builtins(v8: &V8Proc, addr: u64) -> bool {
    let count = v8.builtin_count as usize;
    for i in 0..MAX_BUILTIN_RANGES {
        if i >= count {
            break;
        }
        if let Some(r) = v8.builtins.get(i)
            && addr >= r.start
            && addr < r.end
        {
            return true;
        }
    }
    false
}

/// Steps the current frame as V8's if its pc is in the builtins or (`no_table`) in code without an
/// unwind table, and rbp leads to a V8 frame.
#[inline(always)]
pub fn step(s: &mut Scratch, v8: &V8Proc, addr: u64, no_table: bool) -> V8 {
    if !no_table && !in_builtins(v8, addr) {
        return V8::NotV8;
    }
    let Some(frame) = frame_words(s, v8) else {
        bump(stat::V8_NOT_A_FRAME);
        return V8::NotV8;
    };
    let Some([head, data]) = frame else {
        bump(stat::V8_NOT_A_FRAME);
        return V8::NotV8;
    };
    if s.stack.len as usize + 2 > s.stack.frames.len() {
        s.stack.outcome = sonde_abi::unwind::outcome::DEPTH;
        return V8::Stepped(Flow::Stop);
    }
    if !push_word(s, head) || !push_word(s, data) {
        return V8::Stepped(Flow::Stop);
    }
    s.v8.frames += 1;
    if let Some(f) = runtime_frame::unpack(head, data)
        && f.kind != kind::MARKER
    {
        super::announce::announce(&mut s.announced, s.v8.tgid, head, data);
    }
    // The frame record at rbp: the caller's rbp, then the return address.
    let bp = s.regs.bp;
    let saved_bp = s.v8.frame[FRAME_WORDS - 2];
    let return_address = s.v8.frame[FRAME_WORDS - 1];
    if return_address == 0 || return_address >= USER_LIMIT {
        s.stack.outcome = sonde_abi::unwind::outcome::FP_END;
        return V8::Stepped(Flow::Stop);
    }
    s.regs.pc = return_address;
    s.regs.sp = bp + 16;
    s.regs.bp = saved_bp;
    s.exact = 0;
    V8::Stepped(Flow::Continue)
}

/// Reads the frame at rbp and makes its two words: None when rbp cannot be this frame's, Some(None)
/// when its slots are neither a marker nor a `JSFunction`.
#[inline(always)]
fn frame_words(s: &mut Scratch, v8: &V8Proc) -> Option<Option<[u64; 2]>> {
    let bp = s.regs.bp;
    let sp = s.regs.sp;
    if s.bp_lost != 0 || bp < sp || bp - sp > MAX_FRAME_SIZE || bp & 7 != 0 {
        return None;
    }
    let base = bp - u64::from(FRAME_SPAN);
    // SAFETY: the buffer holds FRAME_WORDS words; a fault makes the helper fail, which is handled.
    let read = unsafe {
        generated::bpf_probe_read_user(
            s.v8.frame.as_mut_ptr().cast(),
            (FRAME_WORDS * 8) as u32,
            base as *const _,
        )
    };
    if read != 0 {
        return None;
    }
    let exact = s.exact != 0;
    let marker = slot(&s.v8.frame, v8.fp_marker)?;
    if marker & 1 == 0 {
        // A frame type, Smi-tagged but not shifted (`StackFrame::TypeToMarker`).
        let frame_type = marker >> 1;
        if frame_type == 0 || frame_type > MAX_FRAME_TYPE {
            return Some(None);
        }
        return Some(Some(runtime_frame::pack(
            kind::MARKER,
            s.regs.pc,
            exact,
            frame_type,
            0,
        )));
    }
    let function = slot(&s.v8.frame, v8.fp_function)?;
    let bytecode_offset = slot(&s.v8.frame, v8.fp_bytecode_offset)?;
    Some(js_frame(s, v8, function, bytecode_offset, exact))
}

/// The frame of a `JSFunction` (tagged `function`), or None when it is not one.
#[inline(always)]
fn js_frame(
    s: &mut Scratch,
    v8: &V8Proc,
    function: u64,
    bytecode_offset: u64,
    exact: bool,
) -> Option<[u64; 2]> {
    let map = read_object(&mut s.v8.object, function)?;
    let sfi = field_u64(&s.v8.object, v8.js_function_shared)?;
    let code = field_u64(&s.v8.object, v8.js_function_code)?;
    let tgid = s.v8.tgid;
    let slot = (mix(function ^ u64::from(tgid), 0x9e37_79b9_7f4a_7c15) as usize)
        & (FUNCTION_CACHE_SLOTS - 1);
    if let Some(cached) = s.v8.functions.get(slot)
        && cached.function == function
        && cached.sfi == sfi
        && cached.code == code
        && cached.tgid == tgid
    {
        let cached = *cached;
        return Some(frame_of(&cached, s.regs.pc, bytecode_offset, exact));
    }
    let ty = instance_type(v8, map)?;
    if ty < v8.type_js_function_first || ty > v8.type_js_function_last {
        return None;
    }
    let resolved = resolve(s, v8, function, sfi, code)?;
    if let Some(entry) = s.v8.functions.get_mut(slot) {
        *entry = resolved;
    }
    Some(frame_of(&resolved, s.regs.pc, bytecode_offset, exact))
}

/// Reads what the function's `SharedFunctionInfo` (tagged `sfi`) and `Code` (tagged `code`) say; None
/// when `sfi` is not one.
#[inline(always)]
fn resolve(s: &mut Scratch, v8: &V8Proc, function: u64, sfi: u64, code: u64) -> Option<Resolved> {
    // The function: its SharedFunctionInfo, checked by type, and the two words of its check.
    let map = read_object(&mut s.v8.object, sfi)?;
    if instance_type(v8, map)? != v8.type_sfi {
        return None;
    }
    let check = sfi_check(
        field_u64(&s.v8.object, v8.sfi_name_or_scope_info)?,
        field_u64(&s.v8.object, v8.sfi_script)?,
    );
    let mut resolved = Resolved {
        function,
        sfi,
        code,
        tgid: s.v8.tgid,
        check,
        start: 0,
        size: 0,
        code_class: Code::FunctionOnly as u32,
    };
    // Its code: the interpreter's (a builtin, the frame holding a Smi bytecode offset), or compiled
    // code, which must hold the pc.
    let Some(map) = read_object(&mut s.v8.object, code) else {
        return Some(resolved);
    };
    if instance_type(v8, map) != Some(v8.type_code) {
        return Some(resolved);
    }
    let flags = field_u32(&s.v8.object, v8.code_flags).unwrap_or(0);
    let code_kind = (flags >> (v8.code_kind_shift & 31)) & v8.code_kind_mask;
    if code_kind < u32::from(v8.code_kind_baseline) {
        resolved.code_class = Code::Interpreted as u32;
    } else if code_kind > u32::from(v8.code_kind_baseline) {
        // Sparkplug code (baseline) keeps no bytecode offset in its frame, and no way back to its
        // function from the code alone: the function names the frame.
        resolved.code_class = Code::Compiled as u32;
        resolved.start = if v8.code_start_is_pointer != 0 {
            field_u64(&s.v8.object, v8.code_instruction_start).unwrap_or(0)
        } else {
            (code & !HEAP_OBJECT_TAG_MASK) + u64::from(v8.code_instruction_start)
        };
        resolved.size = field_u32(&s.v8.object, v8.code_instruction_size).unwrap_or(0);
    }
    Some(resolved)
}

/// The two words of a frame of the resolved function, interrupted at `pc`.
#[inline(always)]
fn frame_of(r: &Resolved, pc: u64, bytecode_offset: u64, exact: bool) -> [u64; 2] {
    let sfi = r.sfi & !HEAP_OBJECT_TAG_MASK;
    if r.code_class == Code::Interpreted as u32 && bytecode_offset & 1 == 0 && bytecode_offset != 0
    {
        // A Smi: the value is in the upper half (64-bit V8 without pointer compression).
        return runtime_frame::pack(kind::BYTECODE, sfi, exact, bytecode_offset >> 32, r.check);
    }
    if r.code_class == Code::Compiled as u32 && pc >= r.start && pc < r.start + u64::from(r.size) {
        return runtime_frame::pack(
            kind::CODE,
            r.code & !HEAP_OBJECT_TAG_MASK,
            exact,
            pc - r.start,
            code_check(r.start, r.size),
        );
    }
    bump(stat::V8_FUNCTION_ONLY);
    runtime_frame::pack(kind::FUNCTION, sfi, exact, 0, r.check)
}

/// Reads the first bytes of the heap object at tagged address `tagged` into `buf`; its map (tagged).
#[inline(always)]
fn read_object(buf: &mut [u8; OBJECT_BYTES], tagged: u64) -> Option<u64> {
    if tagged & HEAP_OBJECT_TAG_MASK != HEAP_OBJECT_TAG || tagged >= USER_LIMIT {
        return None;
    }
    // SAFETY: `buf` holds OBJECT_SPAN bytes; a fault makes the helper fail, which is handled.
    let read = unsafe {
        generated::bpf_probe_read_user(
            buf.as_mut_ptr().cast(),
            OBJECT_SPAN,
            (tagged - HEAP_OBJECT_TAG) as *const _,
        )
    };
    if read != 0 {
        return None;
    }
    // The map is every heap object's first word.
    field_u64(buf, 0)
}

/// The instance type of the objects whose map is `map` (tagged).
#[inline(always)]
fn instance_type(v8: &V8Proc, map: u64) -> Option<u16> {
    if map & HEAP_OBJECT_TAG_MASK != HEAP_OBJECT_TAG || map >= USER_LIMIT {
        return None;
    }
    let at = map - HEAP_OBJECT_TAG + u64::from(v8.map_instance_type);
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    unsafe { bpf_probe_read_user(at as *const u16) }.ok()
}

/// The frame slot `below` bytes under rbp, from the words read at rbp - FRAME_SPAN. Constant
/// indexes: the verifier cannot follow a computed one through the compiler's rewriting.
#[inline(always)]
fn slot(frame: &[u64; FRAME_WORDS], below: u16) -> Option<u64> {
    const _: () = assert!(FRAME_SPAN == 48);
    match below {
        8 => Some(frame[5]),
        16 => Some(frame[4]),
        24 => Some(frame[3]),
        32 => Some(frame[2]),
        40 => Some(frame[1]),
        48 => Some(frame[0]),
        _ => None,
    }
}

#[inline(always)]
fn field_u64(buf: &[u8; OBJECT_BYTES], offset: u16) -> Option<u64> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

#[inline(always)]
fn field_u32(buf: &[u8; OBJECT_BYTES], offset: u16) -> Option<u32> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 4)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}
