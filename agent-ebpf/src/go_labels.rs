//! Goroutine labels: for a sample of a Go process userspace described (`GO_PROCS`), the sampled
//! goroutine's pprof labels are copied out of the process into a per-CPU label set, stored in
//! `SAMPLE_LABELS` under a hash of their content, and the hash goes into the sample's key, so samples of
//! the same labels aggregate together and differently labelled ones apart. Layout and chain in
//! `sonde_abi::go`.
//!
//! Labels are copied in a `bpf_loop` (`crate::repeat`), one label per callback, so the verifier's
//! work does not grow with the number of labels.

use aya_ebpf::helpers::bpf_probe_read_user;
use sonde_abi::{
    go::{
        GoProc, HMAP_BUCKETS, HMAP_LOG2_BUCKETS, LABELS_MAP, LABELS_NONE, LABELS_SLICE,
        MAP_BUCKET_BYTES, MAP_BUCKETS_READ, MAX_LABELS, MIN_TOP_HASH,
    },
    stat,
};

use crate::{
    globals,
    labels::{self, Copying},
    maps::{GO_PROCS, bump},
    user::user_u64,
};

/// The most entries a copy visits: a slice's labels, or the slots of the map buckets read.
const MAX_COPY_LOOPS: u64 = if MAX_LABELS as u64 > MAP_BUCKETS_READ * 8 {
    MAX_LABELS as u64
} else {
    MAP_BUCKETS_READ * 8
};

/// The labels of a sample of `tgid` walked by `WALKER`'s program: read by the native program only
/// (a JVM or Node.js process runs no Go, so their programs hold no label copy to verify).
#[inline(always)]
pub fn of_sample<const WALKER: u32>(tgid: u32) -> u64 {
    if WALKER == crate::runtime::walker::NATIVE {
        current(tgid)
    } else {
        0
    }
}

/// The `SAMPLE_LABELS` key of the current goroutine's labels; 0 when the process is not a Go process
/// described in `GO_PROCS`, the thread runs no goroutine, or the goroutine has no labels.
#[inline(always)]
fn current(tgid: u32) -> u64 {
    if globals::go_labels() == 0 {
        return 0;
    }
    let Some(settings) = GO_PROCS.get_ptr(tgid) else {
        return 0;
    };
    // SAFETY: a pointer from a successful lookup, valid for this program run.
    let p = unsafe { &*settings };
    if p.layout == LABELS_NONE {
        return 0;
    }
    match labels_of(p) {
        Ok(id) => id,
        Err(()) => {
            bump(stat::GO_LABELS_FAULT);
            0
        }
    }
}

#[inline(always)]
fn labels_of(p: &GoProc) -> Result<u64, ()> {
    let fsbase = crate::regs::thread_pointer()?;
    if fsbase == 0 {
        // A thread that never set its fs base runs no Go code.
        return Ok(0);
    }
    let g = user_u64(fsbase.wrapping_add(p.tls_offset as i64 as u64))?;
    if g == 0 {
        // A thread Go does not know (a C thread of a cgo process).
        return Ok(0);
    }
    let m = user_u64(g + u64::from(p.g_m))?;
    if m == 0 {
        return Ok(0);
    }
    // The goroutine the M runs: `g` may be its g0 (system stack) or gsignal (signal handler).
    let curg = user_u64(m + u64::from(p.m_curg))?;
    if curg == 0 {
        return Ok(0);
    }
    let labels = user_u64(curg + u64::from(p.g_labels))?;
    if labels == 0 {
        return Ok(0);
    }
    let scratch = labels::scratch().ok_or(())?;
    // SAFETY: the per-CPU scratch entry is this program's alone while it runs.
    let c = unsafe { &mut *scratch };
    c.layout = p.layout;
    let loops = match p.layout {
        LABELS_SLICE => {
            // A slice header: array, len, cap.
            c.base = user_u64(labels)?;
            c.entries = user_u64(labels + 8)?;
            if c.entries > MAX_LABELS as u64 {
                c.set.cut = 1;
            }
            c.entries.min(MAX_LABELS as u64)
        }
        LABELS_MAP => {
            // A pointer to the map variable, which points at the hmap.
            let hmap = user_u64(labels)?;
            if hmap == 0 {
                return Ok(0);
            }
            let count = user_u64(hmap)?;
            // SAFETY: a user address; a fault makes the helper fail, which is handled.
            let log2: u8 = unsafe { bpf_probe_read_user((hmap + HMAP_LOG2_BUCKETS) as *const u8) }
                .map_err(|_| ())?;
            c.base = user_u64(hmap + HMAP_BUCKETS)?;
            if c.base == 0 || count == 0 {
                return Ok(0);
            }
            let buckets = 1u64 << (log2 & 7);
            if buckets > MAP_BUCKETS_READ || count > MAX_LABELS as u64 {
                c.set.cut = 1;
            }
            c.entries = buckets.min(MAP_BUCKETS_READ);
            c.entries * 8
        }
        _ => return Err(()),
    };
    // bpf_loop's context must be on the stack: a pointer to the scratch entry is. Clamped where the
    // legacy object's bounded loop can see it (both layouts give at most this many).
    let mut at: *mut Copying = scratch;
    let loops = loops.min(MAX_COPY_LOOPS);
    crate::repeat::repeat(loops as u32, copy_entry, (&raw mut at).cast());
    if c.fault != 0 {
        return Err(());
    }
    if c.set.count == 0 {
        return Ok(0);
    }
    bump(stat::GO_LABELED);
    if c.set.cut != 0 {
        bump(stat::GO_LABELS_CUT);
    }
    Ok(labels::store(c))
}

/// `bpf_loop` callback: one slice entry, or one map slot (bucket `index / 8`, slot `index % 8`).
/// In the legacy object a loop of at most `MAX_COPY_LOOPS` the verifier walks in the sampling
/// program, calling a global twin that takes scalars only (see `crate::unwind::steps`).
#[inline(never)]
extern "C" fn copy_entry(index: u64, ctx: *mut core::ffi::c_void) -> i64 {
    // SAFETY: `ctx` points at the pointer to the per-CPU `Copying` that `labels_of` passed.
    let copying = unsafe { *ctx.cast::<*mut Copying>() };
    #[cfg(not(feature = "legacy"))]
    let step = sonde_copy_label(copying, index);
    #[cfg(feature = "legacy")]
    let step = sonde_legacy_copy_label(index);
    // SAFETY: as above; the loop's per-CPU entry.
    crate::verifier::loop_answer(unsafe { &mut (*copying).opaque }, step)
}

/// `sonde_copy_label`, with the per-CPU `Copying` looked up again.
#[cfg(feature = "legacy")]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn sonde_legacy_copy_label(index: u64) -> i64 {
    let copying = labels::current();
    sonde_copy_label(copying, index)
}

/// One label: a global BPF function, checked once on its own (see `unwind::table_step`); as the
/// callback's static body it was checked again for each state of its caller (9,612 instructions of
/// the native program's).
#[cfg_attr(not(feature = "legacy"), unsafe(no_mangle), inline(never))]
// In the legacy object, part of its global twin: one frame fewer, as Linux 5.10 counts every
// frame of a call chain (each rounded up to 32 bytes) against the 512-byte stack.
#[cfg_attr(feature = "legacy", inline(always))]
pub extern "C" fn sonde_copy_label(copying: *mut Copying, index: u64) -> i64 {
    // SAFETY: null or the per-CPU `Copying`, valid while the loop runs.
    let Some(c) = (unsafe { copying.as_mut() }) else {
        return 1;
    };
    if c.set.count as usize >= MAX_LABELS {
        c.set.cut = 1;
        return 1;
    }
    let (key_at, value_at) = if c.layout == LABELS_SLICE {
        // `{key, value string}`: 32 bytes.
        let at = c.base + index * 32;
        (at, at + 16)
    } else {
        let (bucket, slot) = (index / 8, index % 8);
        let at = c.base + bucket * MAP_BUCKET_BYTES;
        if slot == 0 {
            // SAFETY: a user address; a fault makes the helper fail, which is handled.
            match unsafe { bpf_probe_read_user(at as *const [u8; 8]) } {
                Ok(top) => c.tophash = top,
                Err(_) => {
                    c.fault = 1;
                    return 1;
                }
            }
        }
        if c.tophash[(slot & 7) as usize] < MIN_TOP_HASH {
            return 0;
        }
        // tophash [8]u8, keys [8]string, values [8]string.
        (at + 8 + slot * 16, at + 136 + slot * 16)
    };
    let Some(label) = labels::next(c) else {
        return 1;
    };
    let (Ok(key_len), Ok(value_len)) = (
        copy_string(key_at, &mut label.key),
        copy_string(value_at, &mut label.value),
    ) else {
        c.fault = 1;
        return 1;
    };
    if key_len.1 || value_len.1 {
        c.set.cut = 1;
    }
    labels::add(c, key_len.0, value_len.0);
    0
}

/// Copies the Go string whose `{ptr, len}` header is at `header` into `out` (NUL padded); its
/// length kept, and whether it was cut.
#[inline(always)]
fn copy_string<const N: usize>(header: u64, out: &mut [u8; N]) -> Result<(u32, bool), ()> {
    let ptr = user_u64(header)?;
    let len = user_u64(header + 8)?;
    labels::copy_user(ptr, len, out)
}
