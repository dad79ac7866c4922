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
    let object = Object {
        address: frame.address,
        check: frame.check,
        tgid,
    };
    announce_object(announced, object, proc_event::RUNTIME_FRAME, head, data);
}

/// An object of a process, told apart from another at a reused address by `check`.
#[derive(Clone, Copy)]
pub struct Object {
    pub address: u64,
    pub check: u32,
    pub tgid: u32,
}

/// Sends an event of `kind` (`address` and `data` its payload) announcing `object`, unless this CPU
/// did lately. The event is built only when sent: built before, it stayed on the BPF stack of every
/// caller, past the legacy object's 512 bytes.
#[inline(always)]
pub fn announce_object(
    announced: &mut [Announced; ANNOUNCED_SLOTS],
    object: Object,
    kind: u32,
    address: u64,
    data: u64,
) {
    if first_time(announced, object) {
        send(kind, object.tgid, address, data);
    }
}

/// Whether this CPU did not announce `object` lately; remembers it as announced.
#[inline(always)]
pub fn first_time(announced: &mut [Announced; ANNOUNCED_SLOTS], object: Object) -> bool {
    let Object {
        address: at,
        check,
        tgid,
    } = object;
    let key = at ^ u64::from(check) << 17 ^ u64::from(tgid);
    let slot = (mix(key, 0xff51_afd7_ed55_8ccd) as usize) & (ANNOUNCED_SLOTS - 1);
    let Some(seen) = announced.get_mut(slot) else {
        return false;
    };
    if seen.address == at && seen.check == check && seen.tgid == tgid {
        return false;
    }
    *seen = Announced {
        address: at,
        check,
        tgid,
    };
    true
}

/// Sends an announcement of `kind` with its payload.
#[inline(always)]
fn send(kind: u32, tgid: u32, address: u64, data: u64) {
    let _ = send_proc_event(&ProcEvent {
        kind,
        tgid,
        time_ns: 0,
        address,
        data,
        extra: 0,
    });
}
