//! Runtime objects announced to userspace as the walk first meets them: the objects of runtime
//! frames (`proc_event::RUNTIME_FRAME`), whichever runtime they are of (a Java method or compiled
//! code, a JavaScript function or code object), CPython's code objects (`proc_event::PYTHON_CODE`)
//! and Ruby's instruction sequences (`proc_event::RUBY_ISEQ`). Userspace reads each at once, while it lives (a class loaded, code not
//! freed, an object a garbage collector has not moved yet); the frames named at the window's end
//! take what was read then, validated by the same check.
//!
//! Most frames announce nothing: the same objects run again and again, and each CPU remembers what it
//! announced lately (direct-mapped by hash). A lost announcement is counted (`PROC_EVENTS_LOST`), and
//! the frame is read at the window's end.

use sonde_abi::{ProcEvent, proc_event, runtime_frame};

use super::mix;
use crate::maps::send_proc_event;

/// Objects remembered per CPU as announced. 64 rather than 128 since stacks hold 1,024 words: the
/// scratch must stay within a per-CPU value's 32 KiB, and a forgotten object costs one more event
/// (userspace drops the repeat), while the stack's words are what reaches a deep recursion's root.
pub const ANNOUNCED_SLOTS: usize = 64;

/// An object announced to userspace: its head's address and its check, in its process.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Announced {
    address: u64,
    check: u32,
    tgid: u32,
}

/// Tells userspace about the object of the runtime frame `[head, data]` of `tgid`, unless this CPU
/// did lately.
#[inline(always)]
pub fn announce(announced: &mut [Announced; ANNOUNCED_SLOTS], tgid: u32, head: u64, data: u64) {
    let Some(frame) = runtime_frame::unpack(head, data) else {
        return;
    };
    let event = ProcEvent {
        kind: proc_event::RUNTIME_FRAME,
        tgid,
        time_ns: 0,
        address: head,
        data,
    };
    announce_object(announced, frame.address, frame.check, event);
}

/// Sends `event`, announcing the object at `address` (told apart from a reused address by `check`)
/// in `event.tgid`, unless this CPU did lately.
#[inline(always)]
pub fn announce_object(
    announced: &mut [Announced; ANNOUNCED_SLOTS],
    address: u64,
    check: u32,
    event: ProcEvent,
) {
    let tgid = event.tgid;
    let key = address ^ u64::from(check) << 17 ^ u64::from(tgid);
    let slot = (mix(key, 0xff51_afd7_ed55_8ccd) as usize) & (ANNOUNCED_SLOTS - 1);
    let Some(seen) = announced.get_mut(slot) else {
        return;
    };
    if seen.address == address && seen.check == check && seen.tgid == tgid {
        return;
    }
    *seen = Announced {
        address,
        check,
        tgid,
    };
    let _ = send_proc_event(&event);
}
