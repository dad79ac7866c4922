//! Java frames of HotSpot JVMs, stepped in place among native frames: a pc inside one of the JVM's
//! code heaps (`sonde_abi::hotspot::HsProc`, written by userspace from the VM's own
//! `gHotSpotVMStructs`) is JIT-compiled code, the template interpreter or a stub, none of which has an
//! unwind table. The code blob holding the pc is found through the heap's segment map, and its kind
//! (from its name) says how its frame is laid out:
//! - compiled code (`nmethod`): a fixed frame of `_frame_size` words, rbp saved below the return
//!   address (or a frame pointer with `-XX:+PreserveFramePointer`), a prologue and epilogue where
//!   the frame is not complete, and deoptimized frames whose return address was patched;
//! - the interpreter: an rbp frame holding the `Method*` and the bytecode pointer in fixed slots;
//! - stubs and adapters: their frame size, or rbp when they keep none.
//!
//! Each Java frame is stored as two words (layout in `sonde_abi::hotspot`); userspace names it.
//! Every rule here is x86_64's (registers, frame slots, instruction bytes).

use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use sonde_abi::{
    hotspot::{
        BLOB_SPAN_MAX, CodeHeap, HsProc, MAX_CODE_HEAPS, RA_SEARCH_SLOTS, SEGMAP_STEPS, blob_name,
        interpreted_check, kind, pack_frame,
    },
    stat,
    unwind::outcome,
};

use super::{
    Scratch, mix, push_word,
    step::{Flow, USER_LIMIT},
};
use crate::maps::bump;

/// Farthest rbp may be above sp in an interpreter frame (its expression stack and monitors lie
/// between): beyond, rbp is not this frame's.
const INTERPRETER_FRAME_MAX: u64 = 16 << 10;

/// Words of an interpreter frame read at once: from 10 words below rbp to the return address.
const INTERP_WORDS: usize = 12;
/// Index of the saved rbp (the word at rbp) in that read.
const INTERP_FP: usize = 10;

/// Per-CPU memory of the Java steps of one walk (inside `Scratch`).
#[repr(C)]
pub struct JavaWalk {
    /// The code blob being stepped, its first `blob_span` bytes.
    blob: [u8; BLOB_SPAN_MAX as usize],
    /// Java frames stored by this walk.
    pub frames: u32,
    /// The process walked.
    tgid: u32,
    /// Code blobs this CPU found lately, by the pc they hold (direct-mapped by hash).
    blobs: [CachedBlob; BLOB_CACHE_SLOTS],
    /// The interpreter frame's words around its frame pointer. Read here, not onto the BPF stack:
    /// on Linux 6.18 the verifier counts the frame step's stack in the chain under the sampling
    /// program's (512 bytes in all), and 96 bytes here kept the off-CPU Java program from loading.
    interp: [u64; INTERP_WORDS],
}

/// Code blobs remembered per CPU: most Java frames are return addresses seen again and again (the
/// callers of hot code), and finding a blob costs a walk of the segment map and a read of its header.
const BLOB_CACHE_SLOTS: usize = 128;

/// A blob found for `pc` in process `tgid`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CachedBlob {
    pc: u64,
    tgid: u32,
    _pad: u32,
    blob: Blob,
}

impl JavaWalk {
    /// Forgets the previous walk.
    #[inline(always)]
    pub fn reset(&mut self, tgid: u32) {
        self.frames = 0;
        self.tgid = tgid;
    }
}

/// The code heap holding `addr`, if any.
#[inline(always)]
fn heap_of(hs: &HsProc, addr: u64) -> Option<&CodeHeap> {
    let count = hs.heap_count as usize;
    for i in 0..MAX_CODE_HEAPS {
        if i >= count {
            break;
        }
        let heap = hs.heaps.get(i)?;
        if addr >= heap.low && addr < heap.high {
            return Some(heap);
        }
    }
    None
}

/// Whether `addr` lies in one of the JVM's code heaps.
#[inline(always)]
pub fn in_code_cache(hs: &HsProc, addr: u64) -> bool {
    heap_of(hs, addr).is_some()
}

/// What one Java step did.
pub enum Java {
    /// The pc is not in a code heap: the native step applies.
    NotJava,
    /// The frame was stored and stepped (or the walk ended, with its outcome set).
    Stepped(Flow),
}

/// Steps the current frame if its pc is in one of the JVM's code heaps.
#[inline(always)]
pub fn step(s: &mut Scratch, hs: &HsProc, addr: u64) -> Java {
    let Some(heap) = heap_of(hs, addr) else {
        return Java::NotJava;
    };
    Java::Stepped(stepped(s, hs, heap, addr))
}

/// The fields of a code blob the step reads.
#[repr(C)]
#[derive(Clone, Copy)]
struct Blob {
    address: u64,
    /// Its name's first four bytes: its kind.
    name: u32,
    /// `nmethod::_compile_id` (compiled code and native wrappers only).
    compile_id: u32,
    code_begin: u64,
    code_end: u64,
    /// Bytes.
    frame_size: u64,
    frame_complete: u64,
    /// Compiled code: where a deoptimized frame returns to, and where it keeps its original pc.
    deopt_handler: u64,
    orig_pc_offset: u64,
}

/// Whether `name` is compiled code (an nmethod or a native wrapper): freed and replaced while the
/// JVM runs, unlike stubs and the interpreter.
#[inline(always)]
fn is_compiled(name: u32) -> bool {
    name == blob_name::NMETHOD || name == blob_name::NATIVE_NMETHOD
}

#[inline(always)]
fn stepped(s: &mut Scratch, hs: &HsProc, heap: &CodeHeap, addr: u64) -> Flow {
    let blob = match blob_for(s, hs, heap, addr) {
        Ok(blob) => blob,
        Err(counter) => {
            bump(counter);
            let why = if counter == stat::JAVA_NO_BLOB {
                outcome::BAD_FRAME
            } else {
                outcome::READ_FAULT
            };
            return stop(s, why);
        }
    };
    match blob.name {
        blob_name::NMETHOD => compiled(s, hs, &blob, kind::COMPILED),
        blob_name::NATIVE_NMETHOD => compiled(s, hs, &blob, kind::NATIVE_WRAPPER),
        blob_name::INTERPRETER => interpreted(s, hs, &blob),
        blob_name::VTABLE_CHUNKS => {
            if !store(s, kind::STUB, &blob, blob.name) {
                return Flow::Stop;
            }
            // x86_64: a vtable stub pushes nothing; only the return address is on the stack.
            pop(s, 8, false)
        }
        _ => stub(s, &blob),
    }
}

/// The code blob holding `addr`: remembered by this CPU (compiled code checked to still be there by
/// its compile id), else found and remembered; Err is the counter of why not.
#[inline(always)]
fn blob_for(s: &mut Scratch, hs: &HsProc, heap: &CodeHeap, addr: u64) -> Result<Blob, u32> {
    let tgid = s.java.tgid;
    let slot =
        (mix(addr ^ u64::from(tgid), 0x9e37_79b9_7f4a_7c15) as usize) & (BLOB_CACHE_SLOTS - 1);
    if let Some(cached) = s.java.blobs.get(slot)
        && cached.pc == addr
        && cached.tgid == tgid
    {
        let blob = cached.blob;
        if !is_compiled(blob.name) {
            return Ok(blob);
        }
        // SAFETY: a user address; a fault makes the helper fail, which is handled.
        let id = unsafe {
            bpf_probe_read_user((blob.address + u64::from(hs.nmethod_compile_id)) as *const u32)
        };
        if id == Ok(blob.compile_id) {
            return Ok(blob);
        }
    }
    let address = find_blob(hs, heap, addr).ok_or(stat::JAVA_NO_BLOB)?;
    let blob = read_blob(s, hs, address).ok_or(stat::JAVA_READ_FAULT)?;
    if let Some(entry) = s.java.blobs.get_mut(slot) {
        *entry = CachedBlob {
            pc: addr,
            tgid,
            _pad: 0,
            blob,
        };
    }
    Ok(blob)
}

/// The code blob holding `addr`: the segment map gives, for each segment, how many segments back
/// the block's first one is (0 there, 0xff when free); the blob follows the block's header.
#[inline(always)]
fn find_blob(hs: &HsProc, heap: &CodeHeap, addr: u64) -> Option<u64> {
    let shift = hs.segment_shift & 63;
    let mut segment = (addr - heap.low) >> shift;
    let mut tag: u8 = 0xff;
    for _ in 0..SEGMAP_STEPS {
        // SAFETY: a user address; a fault makes the helper fail, which is handled.
        tag = unsafe { bpf_probe_read_user((heap.segmap + segment) as *const u8) }.ok()?;
        if tag == 0 || tag == 0xff {
            break;
        }
        segment = segment.checked_sub(u64::from(tag))?;
    }
    if tag != 0 {
        return None;
    }
    Some(heap.low + (segment << shift) + u64::from(hs.heap_block_size))
}

/// Reads the blob's header into the scratch and picks out what the step needs; its name's first four
/// bytes tell its kind.
#[inline(always)]
fn read_blob(s: &mut Scratch, hs: &HsProc, address: u64) -> Option<Blob> {
    // A mask the verifier can bound the helper's size with; the range check is the real one.
    let span = hs.blob_span & (2 * BLOB_SPAN_MAX - 1);
    if span == 0 || span > BLOB_SPAN_MAX {
        return None;
    }
    let buf = &mut s.java.blob;
    // SAFETY: `span` bytes fit in `buf`; a fault makes the helper fail, which is handled.
    let read = unsafe {
        generated::bpf_probe_read_user(buf.as_mut_ptr().cast(), span, address as *const _)
    };
    if read != 0 {
        return None;
    }
    let name_ptr = field_u64(buf, hs.blob_name)?;
    // SAFETY: as above.
    let name = unsafe { bpf_probe_read_user(name_ptr as *const u32) }.ok()?;
    let compiled = is_compiled(name);
    let nmethod_u32 = |offset| match compiled {
        true => field_u32(buf, offset).unwrap_or(0),
        false => 0,
    };
    Some(Blob {
        address,
        name,
        compile_id: nmethod_u32(hs.nmethod_compile_id),
        orig_pc_offset: u64::from(nmethod_u32(hs.nmethod_orig_pc_offset)),
        deopt_handler: match compiled {
            true => field_u64(buf, hs.nmethod_deopt_handler).unwrap_or(0),
            false => 0,
        },
        code_begin: field_u64(buf, hs.blob_code_begin)?,
        code_end: field_u64(buf, hs.blob_code_end)?,
        // -1 (`no_frame_size`) for C1's runtime stubs that keep only an rbp frame
        // (`g1_post_barrier_slow`): taken as 0, which steps such a stub by rbp.
        frame_size: (field_u32(buf, hs.blob_frame_size)? as i32).max(0) as u64 * 8,
        // -1 (never safe) for some stubs: no prologue to tell apart.
        frame_complete: (field_u32(buf, hs.blob_frame_complete)? as i32).max(0) as u64,
    })
}

/// A frame of JIT-compiled code (or a native method's wrapper).
#[inline(always)]
fn compiled(s: &mut Scratch, hs: &HsProc, blob: &Blob, frame_kind: u64) -> Flow {
    let (compile_id, deopt_handler, orig_pc_offset) =
        (blob.compile_id, blob.deopt_handler, blob.orig_pc_offset);
    let mut pc = s.regs.pc;
    if pc == deopt_handler && deopt_handler != 0 {
        // Deoptimized: HotSpot patched the return address to its deoptimization handler and kept the
        // real one in the frame, at sp + orig_pc_offset. The original names the right call site.
        // SAFETY: a user address; a fault makes the helper fail, which is handled.
        let orig = unsafe { bpf_probe_read_user((s.regs.sp + orig_pc_offset) as *const u64) };
        if let Ok(orig) = orig
            && orig >= blob.code_begin
            && orig < blob.code_end
        {
            pc = orig;
            bump(stat::JAVA_DEOPT);
        }
    }
    s.regs.pc = pc;
    if !store(s, frame_kind, blob, compile_id) {
        return Flow::Stop;
    }
    let complete_at = blob.code_begin + blob.frame_complete;
    if pc < complete_at {
        return prologue(s, blob);
    }
    if s.exact != 0
        && let Some(flow) = epilogue(s)
    {
        return flow;
    }
    let sp = s.regs.sp;
    let bp = s.regs.bp;
    if s.bp_lost == 0 && bp >= sp && bp < sp + blob.frame_size + 48 {
        // rbp points into this frame: a frame-pointer frame (`-XX:+PreserveFramePointer`, native
        // wrappers). A general-purpose rbp would rarely land there.
        s.regs.sp = bp;
        return pop(s, 16, true);
    }
    // The declared frame, then the return address: compiled code is always called from the code
    // cache (another method, an adapter, the call stub), so a word that is not an address there is
    // not the return address. Code may push a few words beyond its declared frame size.
    let base = sp + blob.frame_size;
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let Ok(words) =
        (unsafe { bpf_probe_read_user(base.wrapping_sub(8) as *const [u64; RA_SEARCH_SLOTS]) })
    else {
        bump(stat::JAVA_READ_FAULT);
        return stop(s, outcome::READ_FAULT);
    };
    for (i, &candidate) in words.iter().enumerate() {
        if in_code_cache(hs, candidate) {
            let new_sp = base + 8 * i as u64;
            let saved_bp = if blob.frame_size >= 16 {
                // SAFETY: as above.
                unsafe { bpf_probe_read_user((new_sp - 16) as *const u64) }.ok()
            } else {
                None
            };
            return resume(s, candidate, new_sp, saved_bp);
        }
    }
    bump(stat::JAVA_BAD_FRAME);
    stop(s, outcome::BAD_FRAME)
}

/// x86_64: a compiled method in its prologue, where the frame is being built, told by the
/// instruction at the pc (HotSpot's `verified_entry` and C1's `build_frame`): methods that bang the
/// stack `push rbp` (with `-XX:+PreserveFramePointer`, `mov rbp, rsp`) then `sub rsp, N`; leaf
/// methods that do not bang it `sub rsp, N` first, then save rbp with `mov [rsp + d], rbp`. Before
/// those, only the return address is on the stack.
#[inline(always)]
fn prologue(s: &mut Scratch, blob: &Blob) -> Flow {
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let Ok(c) = (unsafe { bpf_probe_read_user((s.regs.pc - 1) as *const [u8; 8]) }) else {
        return pop(s, 8, false);
    };
    // c[0] is the byte before the pc, c[1..] the instruction at it.
    const PUSH_RBP: u8 = 0x55;
    let sub_rsp = c[1] == 0x48 && (c[2] == 0x83 || c[2] == 0x81) && c[3] == 0xec;
    let mov_rbp_rsp = c[1..4] == [0x48, 0x89, 0xe5];
    let save_rbp = c[1..3] == [0x48, 0x89] && (c[3] == 0x6c || c[3] == 0xac) && c[4] == 0x24;
    if save_rbp {
        // The whole frame is allocated, rbp not yet saved in it.
        pop(s, blob.frame_size, false)
    } else if mov_rbp_rsp || (sub_rsp && (c[0] == PUSH_RBP || c[0] == 0xe5)) {
        // rbp pushed (and perhaps copied to rbp), the frame not yet allocated.
        pop(s, 16, true)
    } else {
        pop(s, 8, false)
    }
}

/// x86_64: the leaf of a compiled method in its epilogue (OpenTelemetry's and async-profiler's
/// heuristic): at `ret`, only the return address is left; at `pop rbp`, rbp and the return address;
/// past `pop rbp`, the return address. Since JDK 16 C1 and C2 end a method with `add rsp, N; pop rbp;
/// cmp rsp, [r15 + polling word]; ja <poll stub>; ret` (JDK 11: `mov r10, [r15 + polling page];
/// test [r10], eax` in place of the `cmp`/`ja`), so the instructions between `pop rbp` and `ret` are
/// recognised by those bytes; other code has `ret` within a few bytes of `pop rbp` or `leave`.
#[inline(always)]
fn epilogue(s: &mut Scratch) -> Option<Flow> {
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let b = unsafe { bpf_probe_read_user((s.regs.pc - 8) as *const [u8; 16]) }.ok()?;
    const RET: u8 = 0xc3;
    const POP_RBP: u8 = 0x5d;
    const LEAVE: u8 = 0xc9;
    // `cmp rsp, [r15 + disp32]` and `mov r10, [r15 + disp32]` (7 bytes each), `ja rel32` and
    // `test [r10], eax` (the instruction after them).
    const CMP_POLL: [u8; 3] = [0x49, 0x3b, 0xa7];
    const MOV_POLL: [u8; 3] = [0x4d, 0x8b, 0x97];
    let poll_at = |i: usize| b[i..i + 3] == CMP_POLL || b[i..i + 3] == MOV_POLL;
    let after_poll =
        |i: usize| (b[i] == 0x0f && b[i + 1] == 0x87) || b[i..i + 3] == [0x41, 0x85, 0x02];
    // b[8] is the byte at the pc.
    if b[8] == RET {
        return Some(pop(s, 8, false));
    }
    if b[8] == POP_RBP && (poll_at(9) || b[9..15].contains(&RET)) {
        return Some(pop(s, 16, true));
    }
    let past_pop = (b[7] == POP_RBP || b[7] == LEAVE) && (poll_at(8) || b[9..15].contains(&RET));
    let at_poll_branch = b[0] == POP_RBP && poll_at(1) && after_poll(8);
    if past_pop || at_poll_branch {
        return Some(pop(s, 8, false));
    }
    None
}

/// A frame of the template interpreter: rbp is the frame pointer, and the frame keeps its `Method*`
/// and bytecode pointer in fixed slots below it (x86_64 `frame_x86.hpp`); the caller's sp is saved at
/// rbp - 8 (`interpreter_frame_sender_sp_offset`).
#[inline(always)]
fn interpreted(s: &mut Scratch, hs: &HsProc, blob: &Blob) -> Flow {
    let fp = s.regs.bp;
    let sp = s.regs.sp;
    if s.bp_lost != 0 || fp < sp || fp >= sp + INTERPRETER_FRAME_MAX {
        return unknown_interpreter(s, blob);
    }
    // SAFETY: a user address into the scratch's array; a fault makes the helper fail, handled.
    let read = unsafe {
        generated::bpf_probe_read_user(
            s.java.interp.as_mut_ptr().cast(),
            (8 * INTERP_WORDS) as u32,
            (fp - 8 * INTERP_FP as u64) as *const core::ffi::c_void,
        )
    };
    if read != 0 {
        return unknown_interpreter(s, blob);
    }
    let words = &s.java.interp;
    let slot = |below: u16| {
        let i = INTERP_FP.wrapping_sub(usize::from(below));
        words.get(i).copied()
    };
    let (sender_sp, saved_fp, return_address) = (words[9], words[INTERP_FP], words[11]);
    let (Some(method), Some(saved_bcp)) = (slot(hs.interp_method_slot), slot(hs.interp_bcp_slot))
    else {
        return unknown_interpreter(s, blob);
    };
    // Interrupted in the interpreter, the live bytecode pointer is in r13; the frame's copy is only
    // written at calls (and is the call site for every frame above the leaf).
    let bcp = if s.exact != 0 { s.regs.r13 } else { saved_bcp };
    // SAFETY: as above.
    let Ok(const_method) = (unsafe {
        bpf_probe_read_user((method + u64::from(hs.method_const_method)) as *const u64)
    }) else {
        return unknown_interpreter(s, blob);
    };
    let Some(class_name) = class_name(hs, const_method) else {
        return unknown_interpreter(s, blob);
    };
    let code = const_method + u64::from(hs.const_method_size);
    let bci = if bcp >= code { bcp - code } else { 0xffff };
    let [head, data] = pack_frame(
        kind::INTERPRETED,
        method,
        s.exact != 0,
        bci.min(0xffff),
        interpreted_check(const_method, class_name),
    );
    if !push_pair(s, head, data) {
        return Flow::Stop;
    }
    if sender_sp <= sp {
        bump(stat::JAVA_BAD_FRAME);
        return stop(s, outcome::BAD_FRAME);
    }
    resume(s, return_address, sender_sp, Some(saved_fp))
}

/// The `Symbol*` of the name of the class of the method whose `ConstMethod` is at `const_method`:
/// part of the frame's check (see `sonde_abi::hotspot::interpreted_check`).
#[inline(always)]
fn class_name(hs: &HsProc, const_method: u64) -> Option<u64> {
    // SAFETY (each read): a user address; a fault makes the helper fail, which is handled.
    let pool = unsafe {
        bpf_probe_read_user((const_method + u64::from(hs.const_method_constants)) as *const u64)
    }
    .ok()?;
    let holder =
        unsafe { bpf_probe_read_user((pool + u64::from(hs.pool_holder)) as *const u64) }.ok()?;
    unsafe { bpf_probe_read_user((holder + u64::from(hs.klass_name)) as *const u64) }.ok()
}

/// An interpreter frame whose `Method*` cannot be read: stored as the interpreter's blob, and
/// stepped by rbp if it looks like a frame pointer.
#[inline(always)]
fn unknown_interpreter(s: &mut Scratch, blob: &Blob) -> Flow {
    bump(stat::JAVA_READ_FAULT);
    if !store(s, kind::INTERPRETER_UNKNOWN, blob, blob.name) {
        return Flow::Stop;
    }
    super::step::frame_pointer(s)
}

/// A stub or adapter: its declared frame, or rbp when it declares none (the call stub).
#[inline(always)]
fn stub(s: &mut Scratch, blob: &Blob) -> Flow {
    if !store(s, kind::STUB, blob, blob.name) {
        return Flow::Stop;
    }
    if blob.frame_size == 0 {
        return super::step::frame_pointer(s);
    }
    let size = blob.frame_size;
    pop(s, size, size >= 16)
}

/// Stores the frame of `blob` with the pc's offset in its code.
#[inline(always)]
fn store(s: &mut Scratch, frame_kind: u64, blob: &Blob, check: u32) -> bool {
    let [head, data] = pack_frame(
        frame_kind,
        blob.address,
        s.exact != 0,
        s.regs.pc.wrapping_sub(blob.code_begin),
        check,
    );
    push_pair(s, head, data)
}

/// Appends a Java frame's two words; false (outcome DEPTH) when they do not fit.
#[inline(always)]
fn push_pair(s: &mut Scratch, head: u64, data: u64) -> bool {
    if s.stack.len as usize + 2 > s.stack.frames.len() {
        s.stack.outcome = outcome::DEPTH;
        return false;
    }
    if !push_word(s, head) || !push_word(s, data) {
        return false;
    }
    s.java.frames += 1;
    announce(s, head, data);
    true
}

/// Tells userspace about a method, compiled code or stub it may not have read yet (`announce`): a
/// class can be unloaded, compiled code freed and the JVM gone before the window's end (a stub lives
/// as long as the JVM, but a short-lived JVM, a build's `javac`, is gone by then).
#[inline(always)]
fn announce(s: &mut Scratch, head: u64, data: u64) {
    super::announce::announce(&mut s.announced, s.java.tgid, head, data);
}

/// Pops a frame of `size` bytes whose last word is the return address (and the one below it the
/// saved rbp when `has_bp`).
#[inline(always)]
fn pop(s: &mut Scratch, size: u64, has_bp: bool) -> Flow {
    let new_sp = s.regs.sp + size;
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let Ok(pair) = (unsafe { bpf_probe_read_user((new_sp - 16) as *const [u64; 2]) }) else {
        bump(stat::JAVA_READ_FAULT);
        return stop(s, outcome::READ_FAULT);
    };
    resume(s, pair[1], new_sp, has_bp.then_some(pair[0]))
}

/// Continues the walk at the caller: `pc`, its `sp`, and rbp when the frame saved it (else rbp is
/// unchanged: the callee did not touch it).
#[inline(always)]
fn resume(s: &mut Scratch, pc: u64, sp: u64, bp: Option<u64>) -> Flow {
    if pc == 0 || pc >= USER_LIMIT || sp <= s.regs.sp {
        bump(stat::JAVA_BAD_FRAME);
        return stop(s, outcome::BAD_FRAME);
    }
    s.regs.pc = pc;
    s.regs.sp = sp;
    if let Some(bp) = bp {
        s.regs.bp = bp;
        s.bp_lost = 0;
    }
    s.exact = 0;
    Flow::Continue
}

#[inline(always)]
fn stop(s: &mut Scratch, why: u32) -> Flow {
    s.stack.outcome = why;
    Flow::Stop
}

#[inline(always)]
fn field_u64(buf: &[u8; BLOB_SPAN_MAX as usize], offset: u16) -> Option<u64> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

#[inline(always)]
fn field_u32(buf: &[u8; BLOB_SPAN_MAX as usize], offset: u16) -> Option<u32> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 4)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}
