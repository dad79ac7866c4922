//! PHP frames: after the native walk, the executor's frame chain from `current_execute_data`, one
//! word per frame running PHP code appended to the same stack (layout in `sonde_abi::php`). Every
//! field is read at an offset userspace gave (`PHP_PROCS`), as they differ per version.
//!
//! Frames are walked in a `bpf_loop` (`crate::repeat`), one global step per frame, as CRuby's are;
//! for the same reason the legacy object (Linux 5.10 to 6.0) holds no PHP walk, and the loader turns
//! the runtime off there and says so (`KernelSide::in_legacy`).

#[cfg(not(feature = "legacy"))]
use core::ffi::c_void;

#[cfg(not(feature = "legacy"))]
use aya_ebpf::helpers::generated;
#[cfg(not(feature = "legacy"))]
use sonde_abi::{
    appended::{self, ENTRY},
    php::{CALL_TOP, EVAL_CODE, FRAME_READ, PhpProc, USER_FUNCTION},
    proc_event, stat,
};

use super::Scratch;
#[cfg(not(feature = "legacy"))]
use crate::{
    maps::{PHP_PROCS, add, bump},
    repeat::repeat,
    user::user_u64,
};

/// Per-CPU state of one PHP walk (inside `Scratch`).
#[repr(C)]
pub struct PhpWalk {
    /// The next frame (`zend_execute_data`) to read; 0 ends the walk.
    ex: u64,
    /// PHP frames stored by this walk.
    frames: u32,
    /// Frames stored since the last one marked as its executor call's first.
    open: u32,
    /// Non-zero when the walk ended on unreadable memory.
    fault: u32,
    /// The process walked.
    tgid: u32,
    /// The frame being read.
    buf: [u8; FRAME_BYTES],
    /// Functions this CPU found compiled from PHP lately (direct-mapped by address; 0 is empty):
    /// most frames run functions seen at the last samples, and a hit spares the read of the type.
    user_funcs: [u64; FUNC_SLOTS],
}

const FRAME_BYTES: usize = 56;
/// Functions remembered per CPU.
const FUNC_SLOTS: usize = 32;

/// What the frame callback gets.
#[repr(C)]
#[cfg(not(feature = "legacy"))]
struct FrameWalk {
    scratch: *mut Scratch,
    settings: *const PhpProc,
}

/// Appends the PHP frames of `tgid`'s running code, when it runs a PHP executor described, and says
/// how many.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
pub fn walk(scratch: *mut Scratch, tgid: u32) -> u32 {
    let Some(settings) = PHP_PROCS.get_ptr(tgid) else {
        return 0;
    };
    bump(stat::PHP_WALKS);
    // SAFETY: a pointer from a successful lookup, valid for this program run.
    let p = unsafe { &*settings };
    let Ok(ex) = user_u64(p.current_execute_data) else {
        bump(stat::PHP_READ_FAULT);
        return 0;
    };
    if ex == 0 {
        bump(stat::PHP_NO_CONTEXT);
        return 0;
    }
    // SAFETY: the walk's scratch entry, this program's alone while it runs.
    let s = unsafe { &mut *scratch };
    s.php.ex = ex;
    s.php.frames = 0;
    s.php.open = 0;
    s.php.fault = 0;
    s.php.tgid = tgid;
    let mut walk = FrameWalk { scratch, settings };
    repeat(
        sonde_abi::MAX_STACK_DEPTH as u32,
        php_frame,
        (&raw mut walk).cast(),
    );
    // SAFETY: the loop is over; `s` is ours again.
    let s = unsafe { &mut *scratch };
    add(stat::PHP_FRAMES, u64::from(s.php.frames));
    if s.php.fault != 0 {
        bump(stat::PHP_READ_FAULT);
    } else if s.php.ex != 0 {
        bump(stat::PHP_TRUNCATED);
    }
    if s.php.fault != 0 || s.php.ex != 0 {
        super::unflag_last(s, s.php.frames, ENTRY);
    }
    s.php.frames
}

/// The legacy object walks no PHP frames (see the module's documentation).
#[cfg(feature = "legacy")]
#[inline(always)]
pub fn walk(_scratch: *mut Scratch, _tgid: u32) -> u32 {
    0
}

/// `bpf_loop` callback: one frame.
#[cfg(not(feature = "legacy"))]
#[inline(never)]
extern "C" fn php_frame(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `FrameWalk` passed by `walk`; both pointers are live for the loop.
    let walk = unsafe { &*ctx.cast::<FrameWalk>() };
    super::loop_flow(walk.scratch, sonde_step_php(walk.scratch, walk.settings))
}

/// One frame: a global BPF function, checked once on its own (see `super::table_step`).
#[cfg(not(feature = "legacy"))]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn sonde_step_php(scratch: *mut Scratch, settings: *const PhpProc) -> i64 {
    // SAFETY: null or the walk's scratch and the process's settings, valid while the walk runs.
    let (Some(s), Some(p)) = (unsafe { (scratch.as_mut(), settings.as_ref()) }) else {
        return 1;
    };
    let ex = s.php.ex;
    if ex == 0 {
        return 1;
    }
    // SAFETY: `FRAME_READ` bytes fit in `buf`; a fault makes the helper fail, which is handled.
    let read = unsafe {
        generated::bpf_probe_read_user(
            s.php.buf.as_mut_ptr().cast(),
            FRAME_READ,
            ex as *const c_void,
        )
    };
    if read != 0 {
        s.php.fault = 1;
        return 1;
    }
    let (Some(opline), Some(func), Some(info), Some(prev)) = (
        buf_u64(&s.php.buf, p.ex_opline),
        buf_u64(&s.php.buf, p.ex_func),
        buf_u64(&s.php.buf, p.ex_call_info),
        buf_u64(&s.php.buf, p.ex_prev),
    ) else {
        s.php.fault = 1;
        return 1;
    };
    s.php.ex = prev;
    // The low half of the word at `This.u1.type_info` is the call info.
    let top = info as u32 & CALL_TOP != 0;
    let user = is_user_function(&mut s.php, p, func);
    if s.php.fault != 0 {
        return 1;
    }
    if !user {
        // C code (or no function): among the native frames. An executor call ending here ends with
        // the frame stored last.
        if top {
            mark_entry(s);
        }
        return 0;
    }
    // The line of the opline the frame last saved: the leaf's may lag behind the one running, as
    // the executor keeps it in a register between calls.
    let line = if opline == 0 {
        0
    } else {
        user_u64(opline.wrapping_add(u64::from(p.op_lineno))).map_or(0, |w| w & 0xffff_ffff)
    };
    let word = appended::pack(appended::PHP, func, line, top);
    if !super::store(s, word, word) {
        // Full: the walk stops here with frames left (counted as truncated).
        s.php.ex = ex;
        return 1;
    }
    s.php.frames += 1;
    s.php.open = if top { 0 } else { s.php.open + 1 };
    let object = super::announce::Object {
        address: func,
        check: 0,
        tgid: s.php.tgid,
    };
    super::announce::announce_object(&mut s.announced, object, proc_event::PHP_FUNCTION, func, 0);
    0
}

/// Whether `func` is a function compiled from PHP (not C, not null), as this CPU saw it lately or
/// read now. A remembered address can only mislead if its function was freed (a closure, `eval`'d
/// code) and the memory reused for a C function's copy: that frame is then named unreadable.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn is_user_function(php: &mut PhpWalk, p: &PhpProc, func: u64) -> bool {
    if func == 0 {
        return false;
    }
    let slot = (super::mix(func, 0xc4ce_b9fe_1a85_ec53) as usize) & (FUNC_SLOTS - 1);
    let Some(seen) = php.user_funcs.get_mut(slot) else {
        return false;
    };
    if *seen == func {
        return true;
    }
    let Ok(word) = user_u64(func.wrapping_add(u64::from(p.func_type))) else {
        php.fault = 1;
        return false;
    };
    let kind = word as u8;
    let user = kind == USER_FUNCTION || kind == EVAL_CODE;
    if user {
        *seen = func;
    }
    user
}

/// Marks the last stored frame as its executor call's first, when the frame the executor was
/// entered with runs no PHP code.
#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn mark_entry(s: &mut Scratch) {
    if s.php.open > 0 {
        s.php.open = 0;
        super::flag_last(s, ENTRY);
    }
}

#[cfg(not(feature = "legacy"))]
#[inline(always)]
fn buf_u64(buf: &[u8; FRAME_BYTES], offset: u16) -> Option<u64> {
    let at = usize::from(offset);
    let bytes = buf.get(at..at + 8)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}
