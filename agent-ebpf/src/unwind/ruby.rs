//! CRuby frames: after the native walk, the sampled thread's control frames, one word per frame
//! running Ruby code appended to the same stack (layout in `sonde_abi::ruby`). The thread's execution
//! context is its `ruby_current_ec`, found where userspace said (`RB_PROCS`); every field is read at
//! an offset from those settings, never from a compiled-in struct, as they differ per version.
//!
//! Frames are walked in a `bpf_loop` (`crate::repeat`), one global step per frame, as CPython's
//! are. The legacy object (Linux 5.10 to 6.0) holds no Ruby walk: its loops would each need a
//! global twin taking scalars, and a walk for kernels that old was not worth the verifier's
//! budget. There the loader turns the runtime off and says so (`KernelSide::in_legacy`).

#[cfg(not(feature = "legacy"))]
use core::ffi::c_void;

#[cfg(not(feature = "legacy"))]
use aya_ebpf::helpers::{bpf_probe_read_user, generated};
#[cfg(not(feature = "legacy"))]
use sonde_abi::{
    appended::{self, ENTRY},
    ruby::{
        CFP_READ, EP_BEFORE, FRAME_FLAG_FINISH, FRAME_MAGIC_MASK, MAGIC_CFUNC, MAGIC_DUMMY,
        MAGIC_IFUNC, MAGIC_METHOD, RbProc,
    },
};
#[cfg(not(feature = "legacy"))]
use sonde_abi::{proc_event, stat};

use super::Scratch;
#[cfg(not(feature = "legacy"))]
use super::mix;
#[cfg(not(feature = "legacy"))]
use crate::{
    maps::{RB_PROCS, add, bump},
    repeat::repeat,
    user::user_u64,
};

/// Per-CPU state of one Ruby walk (inside `Scratch`).
#[repr(C)]
pub struct RbWalk {
    /// The next control frame to read; the walk ends at `end`.
    cfp: u64,
    /// The end of the thread's VM stack: the control frames' root end.
    end: u64,
    /// Ruby frames stored by this walk.
    frames: u32,
    /// Frames stored since the last one marked as its VM loop's first.
    open: u32,
    /// Non-zero when the walk ended on unreadable memory.
    fault: u32,
    /// The process walked.
    tgid: u32,
    /// The control frame being read.
    buf: [u8; 48],
    /// Instruction sequences this CPU read lately (direct-mapped by address): most frames run code
    /// seen at the last samples, and a hit spares two of a frame's four reads.
    iseqs: [CachedIseq; ISEQ_SLOTS],
}

/// Instruction sequences remembered per CPU.
const ISEQ_SLOTS: usize = 32;

/// An instruction sequence as read: its body, and its instructions' range, which also tells a reused
/// address apart (a pc outside it is not this sequence's).
#[repr(C)]
#[derive(Clone, Copy)]
struct CachedIseq {
    iseq: u64,
    body: u64,
    encoded: u64,
    /// Bytes of instructions from `encoded`.
    len: u64,
}

/// What the frame callback gets.
#[repr(C)]
#[cfg(not(feature = "legacy"))]
struct FrameWalk {
    scratch: *mut Scratch,
    settings: *const RbProc,
}

/// Appends the Ruby frames of the current thread of `tgid`, when it runs a Ruby userspace described,
/// and says how many.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
pub fn walk(scratch: *mut Scratch, tgid: u32) -> u32 {
    let Some(settings) = RB_PROCS.get_ptr(tgid) else {
        return 0;
    };
    bump(stat::RB_WALKS);
    // SAFETY: a pointer from a successful lookup, valid for this program run.
    let p = unsafe { &*settings };
    let Ok(ec) = crate::tls::address(&p.ec).and_then(|at| match at {
        0 => Ok(0),
        at => user_u64(at),
    }) else {
        bump(stat::RB_READ_FAULT);
        return 0;
    };
    if ec == 0 || !own_context(p, ec) {
        bump(stat::RB_NO_CONTEXT);
        return 0;
    }
    let (Ok(stack), Ok(size), Ok(cfp)) = (
        user_u64(ec + u64::from(p.ec_stack)),
        user_u64(ec + u64::from(p.ec_stack_size)),
        user_u64(ec + u64::from(p.ec_cfp)),
    ) else {
        bump(stat::RB_READ_FAULT);
        return 0;
    };
    // SAFETY: the walk's scratch entry, this program's alone while it runs.
    let s = unsafe { &mut *scratch };
    s.rb.cfp = cfp;
    s.rb.end = stack.wrapping_add(size.wrapping_mul(8));
    s.rb.frames = 0;
    s.rb.open = 0;
    s.rb.fault = 0;
    s.rb.tgid = tgid;
    let mut walk = FrameWalk { scratch, settings };
    repeat(
        sonde_abi::MAX_STACK_DEPTH as u32,
        ruby_frame,
        (&raw mut walk).cast(),
    );
    // SAFETY: the loop is over; `s` is ours again.
    let s = unsafe { &mut *scratch };
    add(stat::RB_FRAMES, u64::from(s.rb.frames));
    if s.rb.fault != 0 {
        bump(stat::RB_READ_FAULT);
    } else if s.rb.cfp < s.rb.end {
        bump(stat::RB_TRUNCATED);
    }
    if s.rb.fault != 0 || s.rb.cfp < s.rb.end {
        super::unflag_last(s, s.rb.frames, ENTRY);
    }
    s.rb.frames
}

/// Whether context `ec` is the sampled thread's. A thread-local context always is; 2.7's shared one
/// is the context of the thread holding the VM's lock, whose `pthread_t` is compared with the
/// sampled thread's (architecture-specific: glibc's `pthread_t` is the thread pointer on x86_64, the
/// only architecture that walks Ruby, see `runtimes::ruby::capture`).
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn own_context(p: &RbProc, ec: u64) -> bool {
    if p.ec_thread == 0 {
        return true;
    }
    let Ok(thread) = user_u64(ec + u64::from(p.ec_thread)) else {
        return false;
    };
    let (Ok(id), Ok(tp)) = (
        user_u64(thread + u64::from(p.thread_id)),
        crate::regs::thread_pointer(),
    ) else {
        return false;
    };
    id == tp
}

/// The legacy object walks no Ruby frames (see the module's documentation).
#[cfg(feature = "legacy")]
#[inline(always)]
pub fn walk(_scratch: *mut Scratch, _tgid: u32) -> u32 {
    0
}

/// `bpf_loop` callback: one control frame.
#[cfg(not(feature = "legacy"))]
#[inline(never)]
extern "C" fn ruby_frame(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `FrameWalk` passed by `walk`; both pointers are live for the loop.
    let walk = unsafe { &*ctx.cast::<FrameWalk>() };
    super::loop_flow(walk.scratch, sonde_step_ruby(walk.scratch, walk.settings))
}

/// One control frame: a global BPF function, checked once on its own (see `super::table_step`).
#[cfg(not(feature = "legacy"))]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn sonde_step_ruby(scratch: *mut Scratch, settings: *const RbProc) -> i64 {
    // SAFETY: null or the walk's scratch and the process's settings, valid while the walk runs.
    let (Some(s), Some(p)) = (unsafe { (scratch.as_mut(), settings.as_ref()) }) else {
        return 1;
    };
    let cfp = s.rb.cfp;
    if cfp == 0 || cfp >= s.rb.end {
        return 1;
    }
    // SAFETY: `CFP_READ` bytes fit in `buf`; a fault makes the helper fail, which is handled.
    let read = unsafe {
        generated::bpf_probe_read_user(s.rb.buf.as_mut_ptr().cast(), CFP_READ, cfp as *const c_void)
    };
    if read != 0 {
        s.rb.fault = 1;
        return 1;
    }
    let (Some(pc), Some(iseq), Some(ep)) = (
        buf_u64(&s.rb.buf, p.cfp_pc),
        buf_u64(&s.rb.buf, p.cfp_iseq),
        buf_u64(&s.rb.buf, p.cfp_ep),
    ) else {
        s.rb.fault = 1;
        return 1;
    };
    // A bounded stride, so a wrong size cannot loop in place.
    s.rb.cfp = cfp + u64::from(p.cfp_size.clamp(8, 256));
    // `ep[0]` holds the frame's flags: what it is, and whether it ends its VM loop's call;
    // `ep[-2]` a method frame's method entry.
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let Ok([entry, _, flags]) =
        (unsafe { bpf_probe_read_user(ep.wrapping_sub(EP_BEFORE) as *const [u64; 3]) })
    else {
        s.rb.fault = 1;
        return 1;
    };
    let finish = flags & FRAME_FLAG_FINISH != 0;
    let magic = flags & FRAME_MAGIC_MASK;
    if pc == 0 || iseq == 0 || magic == MAGIC_CFUNC || magic == MAGIC_IFUNC || magic == MAGIC_DUMMY
    {
        // No Ruby code: its C function is among the native frames. A loop's call ending here ends
        // with the frame stored last.
        if finish {
            mark_finish(s);
        }
        return 0;
    }
    let Some(cached) = iseq_of(&mut s.rb, p, iseq, pc) else {
        s.rb.fault = 1;
        return 1;
    };
    let body = cached.body;
    // The pc points past the instruction running, as Ruby's own backtraces take it.
    let position = pc.saturating_sub(cached.encoded) / 8;
    let word = appended::pack(appended::RUBY, body, position, finish);
    if !super::store(s, word, word) {
        // Full: the walk stops here with frames left (counted as truncated).
        s.rb.cfp = cfp;
        return 1;
    }
    s.rb.frames += 1;
    s.rb.open = if finish { 0 } else { s.rb.open + 1 };
    // Code compiled by `eval` (templates, `instance_eval` blocks) is freed once run: its body is
    // read while it lives. A method's entry goes with it: its class names its frames.
    let object = super::announce::Object {
        address: body,
        check: 0,
        tgid: s.rb.tgid,
    };
    let entry = if magic == MAGIC_METHOD { entry } else { 0 };
    super::announce::announce_object(&mut s.announced, object, proc_event::RUBY_ISEQ, body, entry);
    0
}

/// The body and instructions of `iseq`, whose frame's pc is `pc`: as this CPU read them lately, or
/// read now (its body, then the body's `iseq_size` and `iseq_encoded`, adjacent) and remembered.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn iseq_of(rb: &mut RbWalk, p: &RbProc, iseq: u64, pc: u64) -> Option<CachedIseq> {
    let slot = (mix(iseq, 0xff51_afd7_ed55_8ccd) as usize) & (ISEQ_SLOTS - 1);
    let seen = rb.iseqs.get_mut(slot)?;
    if seen.iseq == iseq && pc >= seen.encoded && pc - seen.encoded <= seen.len {
        return Some(*seen);
    }
    let body = user_u64(iseq + u64::from(p.iseq_body)).ok()?;
    // `iseq_size` (u32, in words) in the upper half of the word before `iseq_encoded`: one read.
    let at = body.wrapping_add(u64::from(p.body_encoded)).wrapping_sub(8);
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let [sized, encoded] = unsafe { bpf_probe_read_user(at as *const [u64; 2]) }.ok()?;
    let read = CachedIseq {
        iseq,
        body,
        encoded,
        len: (sized >> 32) * 8,
    };
    // Remembered only when the pc lies in it: a frame caught as its sequence is set up is not.
    if pc >= encoded && pc - encoded <= read.len {
        *seen = read;
    }
    Some(read)
}

/// Marks the last stored frame as its VM loop call's first, when the frame ending that call runs no
/// Ruby code.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn mark_finish(s: &mut Scratch) {
    if s.rb.open > 0 {
        s.rb.open = 0;
        super::flag_last(s, ENTRY);
    }
}

#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn buf_u64(buf: &[u8; 48], offset: u16) -> Option<u64> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}
