//! How a walk repeats its frame step, per object (see `crate::repeat`).
//!
//! The full object loops with `bpf_loop`, whose callbacks call the global steps of `table_step`
//! with pointers to the walk's memory. The legacy object (Linux 5.10 to 6.0) cannot: 5.10 refuses
//! pointer arguments to global functions, and a loop the verifier walks in the sampling program
//! had every iteration's exit check the rest of the program again (past the verifier's limit of 1M
//! instructions on Linux 6.18, minutes on 5.10). So each loop is a global function of its own,
//! taking the scratch entry's index and the tgid, whose iterations call global steps that look the
//! memory up again (two map lookups a frame more): the verifier checks each step once and each loop
//! once per iteration, a few instructions each.

use super::{Walk, push, step, step::Flow};

/// Which step a walk repeats.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// With the process's tables.
    Native,
    /// With the process's tables, and Java frames.
    Java,
    /// With the process's tables, and JavaScript frames.
    V8,
    /// With the mappings the kernel recorded (a process userspace has not captured).
    Vmas,
    /// By frame pointers only.
    FramePointers,
}

/// Walks the stack from the walk's registers with `kind`'s step.
#[inline(always)]
pub(super) fn walk(kind: Kind, walk: &mut Walk) {
    #[cfg(not(feature = "legacy"))]
    full::walk(kind, walk);
    #[cfg(feature = "legacy")]
    legacy::walk(kind, walk);
}

/// One frame by frame pointer: pushed, then stepped. 0 to go on, 1 to stop.
#[inline(always)]
fn frame_pointer_step(s: &mut super::Scratch) -> i64 {
    if !push(s) {
        return 1;
    }
    match step::frame_pointer(s) {
        Flow::Continue => 0,
        Flow::Stop => 1,
    }
}

#[cfg(not(feature = "legacy"))]
mod full {
    use core::ffi::c_void;

    use super::super::{LOOPS, Walk, loop_flow, table_step};
    use super::Kind;
    use crate::repeat::repeat;

    #[inline(always)]
    pub(super) fn walk(kind: Kind, walk: &mut Walk) {
        let step = match kind {
            Kind::Native => with_tables,
            Kind::Java => with_tables_java,
            Kind::V8 => with_tables_v8,
            Kind::Vmas => with_vmas,
            Kind::FramePointers => frame_pointers_only,
        };
        repeat(LOOPS, step, (walk as *mut Walk).cast());
    }

    /// `bpf_loop` callback: one frame with the process's tables. Code mapped after userspace read
    /// the mappings (`dlopen`) is looked up in the mappings the kernel recorded, when the process
    /// exec'd while sonde ran; such frames are stored file-relative, as in [`with_vmas`].
    #[inline(never)]
    extern "C" fn with_tables(_index: u64, ctx: *mut c_void) -> i64 {
        // SAFETY: `ctx` is the `Walk` passed to bpf_loop by `walk`, with `procs` set.
        let w = unsafe { &*ctx.cast::<Walk>() };
        let step = table_step::sonde_step_native(w.scratch, w.procs, u64::from(w.tgid));
        loop_flow(w.scratch, step)
    }

    /// `bpf_loop` callback: as [`with_tables`], for a JVM (`Walk::hs` set).
    #[inline(never)]
    extern "C" fn with_tables_java(_index: u64, ctx: *mut c_void) -> i64 {
        // SAFETY: as `with_tables`.
        let w = unsafe { &*ctx.cast::<Walk>() };
        let step = table_step::sonde_step_java(w.scratch, w.procs, w.hs, u64::from(w.tgid));
        loop_flow(w.scratch, step)
    }

    /// `bpf_loop` callback: as [`with_tables`], for Node.js (`Walk::v8` set).
    #[inline(never)]
    extern "C" fn with_tables_v8(_index: u64, ctx: *mut c_void) -> i64 {
        // SAFETY: as `with_tables`.
        let w = unsafe { &*ctx.cast::<Walk>() };
        let step = table_step::sonde_step_v8(w.scratch, w.procs, w.v8, u64::from(w.tgid));
        loop_flow(w.scratch, step)
    }

    /// `bpf_loop` callback: one frame of a process userspace has not captured, with the mappings
    /// the kernel recorded (`table_step::sonde_step_vmas`).
    #[inline(never)]
    extern "C" fn with_vmas(_index: u64, ctx: *mut c_void) -> i64 {
        // SAFETY: `ctx` is the `Walk` passed to bpf_loop by `walk`, with `vmas` set.
        let w = unsafe { &*ctx.cast::<Walk>() };
        loop_flow(w.scratch, table_step::sonde_step_vmas(w.scratch, w.vmas))
    }

    /// `bpf_loop` callback: one frame by frame pointer (`--unwind fp`, or a process without tables
    /// yet).
    #[inline(never)]
    extern "C" fn frame_pointers_only(_index: u64, ctx: *mut c_void) -> i64 {
        // SAFETY: as `with_tables`; only the scratch pointer is used.
        super::frame_pointer_step(unsafe { &mut *(*ctx.cast::<Walk>()).scratch })
    }
}

#[cfg(feature = "legacy")]
mod legacy {
    use sonde_abi::{ProcMappings, hotspot::HsProc, v8::V8Proc};

    use super::super::{LOOPS, Scratch, UNWIND_SCRATCH, Walk, loop_flow, table_step};
    use super::Kind;
    use crate::maps::{HS_PROCS, PROC_MAPPINGS, V8_PROCS};

    const NATIVE: u64 = 0;
    const JAVA: u64 = 1;
    const V8: u64 = 2;
    const FRAME_POINTERS: u64 = 3;

    #[inline(always)]
    pub(super) fn walk(kind: Kind, walk: &mut Walk) {
        let kind = match kind {
            Kind::Native => NATIVE,
            Kind::Java => JAVA,
            Kind::V8 => V8,
            Kind::FramePointers => FRAME_POINTERS,
            // The legacy object records no mappings (`bpf_find_vma` came in 5.17), so no walk
            // gets here.
            Kind::Vmas => return,
        };
        sonde_legacy_walk(kind, u64::from(walk.slot), u64::from(walk.tgid));
    }

    /// The walk's loop (see the module's documentation): `kind`'s step until it says stop.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_walk(kind: u64, slot: u64, tgid: u64) -> i64 {
        let Some(scratch) = UNWIND_SCRATCH.get_ptr_mut(slot as u32) else {
            return 0;
        };
        match kind {
            NATIVE => repeat_step(scratch, || sonde_legacy_step_native(slot, tgid)),
            JAVA => repeat_step(scratch, || sonde_legacy_step_java(slot, tgid)),
            V8 => repeat_step(scratch, || sonde_legacy_step_v8(slot, tgid)),
            _ => repeat_step(scratch, || sonde_legacy_step_fp(slot)),
        }
        0
    }

    /// `step` until it says stop, or the stack is full.
    #[inline(always)]
    fn repeat_step(scratch: *mut Scratch, step: impl Fn() -> i64) {
        for _ in 0..LOOPS {
            if loop_flow(scratch, step()) != 0 {
                break;
            }
        }
    }

    /// The walk's scratch entry and the process's mappings, found again.
    #[inline(always)]
    fn memory(slot: u64, tgid: u64) -> (*mut Scratch, *mut ProcMappings) {
        let scratch = UNWIND_SCRATCH
            .get_ptr_mut(slot as u32)
            .unwrap_or(core::ptr::null_mut());
        let procs = PROC_MAPPINGS
            .get_ptr_mut(tgid as u32)
            .unwrap_or(core::ptr::null_mut());
        (scratch, procs)
    }

    /// `table_step::sonde_step_native`, from the scratch slot and the tgid.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_step_native(slot: u64, tgid: u64) -> i64 {
        let (scratch, procs) = memory(slot, tgid);
        table_step::sonde_step_native(scratch, procs, tgid)
    }

    /// `table_step::sonde_step_java`, likewise.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_step_java(slot: u64, tgid: u64) -> i64 {
        let (scratch, procs) = memory(slot, tgid);
        let hs: *const HsProc = HS_PROCS.get_ptr(tgid as u32).unwrap_or(core::ptr::null());
        table_step::sonde_step_java(scratch, procs, hs, tgid)
    }

    /// `table_step::sonde_step_v8`, likewise.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_step_v8(slot: u64, tgid: u64) -> i64 {
        let (scratch, procs) = memory(slot, tgid);
        let v8: *const V8Proc = V8_PROCS.get_ptr(tgid as u32).unwrap_or(core::ptr::null());
        table_step::sonde_step_v8(scratch, procs, v8, tgid)
    }

    /// One frame by frame pointer, from the scratch slot.
    #[unsafe(no_mangle)]
    #[inline(never)]
    pub extern "C" fn sonde_legacy_step_fp(slot: u64) -> i64 {
        match UNWIND_SCRATCH.get_ptr_mut(slot as u32) {
            // SAFETY: the per-CPU scratch entry is this program's alone while it runs.
            Some(scratch) => super::frame_pointer_step(unsafe { &mut *scratch }),
            None => 1,
        }
    }
}
