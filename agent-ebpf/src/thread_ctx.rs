//! The OpenTelemetry thread context (OTEP 4947): for a sample of a process userspace described
//! (`TC_PROCS`), the span the sampled thread runs in, read from the thread's `otel_thread_ctx_v1`
//! and stored as the sample's label set (`trace_id`, `span_id` in lowercase hex, then the record's
//! attributes under the names the process's key map gives them). Layout in `sonde_abi::thread_ctx`.
//!
//! The reader runs while the thread is stopped (interrupted, or switching out), as the OTEP's
//! readers do: a record is taken only if it is marked valid, and only if the thread's pointer still
//! points at it after it was read; otherwise the sample is kept without a context and counted.

use aya_ebpf::helpers::{bpf_probe_read_user, bpf_probe_read_user_buf};
use sonde_abi::{
    labels::{HEX_VALUE, KEY_BYTES, MAX_LABELS, VALUE_BYTES},
    stat,
    thread_ctx::{
        MAX_ATTRS, MAX_ATTRS_BYTES, MAX_KEYS, RECORD_HEADER_BYTES, SPAN_ID_LABEL, TRACE_ID_LABEL,
        ThreadCtxProc,
    },
};

use crate::{
    globals,
    labels::{self, Copying},
    maps::{TC_PROCS, bump},
    user::user_u64,
};

/// What a read found.
enum Found {
    /// The label set's key.
    Span(u64),
    /// No span: nothing published, or an all-zero trace id.
    Outside,
    /// A record mid-update, or replaced while read.
    Torn,
}

/// The `SAMPLE_LABELS` key of the sampled thread's span; 0 when the process is not described in
/// `TC_PROCS`, or its thread is outside any span. A function of its own (scalars in and out): inlined,
/// its record and locals grew the sampling program's frame past what the 512-byte stack leaves once
/// the Python step's frames are added (`combined stack size of 3 calls is 624`).
#[inline(never)]
pub fn of_sample(tgid: u32) -> u64 {
    if globals::thread_ctx() == 0 {
        return 0;
    }
    let Some(settings) = TC_PROCS.get_ptr(tgid) else {
        return 0;
    };
    // SAFETY: a pointer from a successful lookup, valid for this program run.
    let p = unsafe { &*settings };
    match read(p) {
        Ok(Found::Span(id)) => {
            bump(stat::TC_LABELED);
            id
        }
        Ok(Found::Outside) => {
            bump(stat::TC_NONE);
            0
        }
        Ok(Found::Torn) => {
            bump(stat::TC_TORN);
            0
        }
        Err(()) => {
            bump(stat::TC_FAULT);
            0
        }
    }
}

#[inline(always)]
fn read(p: &ThreadCtxProc) -> Result<Found, ()> {
    let at = crate::tls::address(&p.place)?;
    if at == 0 {
        return Ok(Found::Outside);
    }
    let record = user_u64(at)?;
    if record == 0 {
        return Ok(Found::Outside);
    }
    // `valid`, `trace_flags`, `attrs_data_size`, little-endian.
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    let tail: u32 = unsafe { bpf_probe_read_user((record + 24) as *const u32) }.map_err(|_| ())?;
    if tail & 0xff == 0 {
        return Ok(Found::Torn);
    }
    let scratch = labels::scratch().ok_or(())?;
    // SAFETY: the per-CPU scratch entry is this program's alone while it runs.
    let c = unsafe { &mut *scratch };
    // The ids are copied as they are, marked for userspace to write in hex (`labels::HEX_VALUE`):
    // formatting them here cost instructions and stack at every sample.
    let trace = id_label::<16>(c, TRACE_ID_LABEL.as_bytes(), record)?;
    if trace == 0 {
        // An all-zero trace id: no trace.
        return Ok(Found::Outside);
    }
    id_label::<8>(c, SPAN_ID_LABEL.as_bytes(), record + 16)?;
    attributes(c, p, record, u64::from(tail >> 16))?;
    // The writer replaces the pointer to switch records, or clears `valid` to update one in place:
    // either seen after the copy means the copy may mix two spans.
    if user_u64(at)? != record {
        return Ok(Found::Torn);
    }
    // SAFETY: as above.
    let valid: u8 = unsafe { bpf_probe_read_user((record + 24) as *const u8) }.map_err(|_| ())?;
    if valid == 0 {
        return Ok(Found::Torn);
    }
    if c.set.cut != 0 {
        bump(stat::TC_CUT);
    }
    Ok(Found::Span(labels::store(c)))
}

/// Adds the label `key` = the `N` bytes at `from`, raw (`HEX_VALUE`); the OR of their words (0 when
/// all are zero).
#[inline(always)]
fn id_label<const N: usize>(c: &mut Copying, key: &[u8], from: u64) -> Result<u64, ()> {
    let Some(label) = labels::next(c) else {
        return Ok(1);
    };
    let k = key.len().min(KEY_BYTES);
    label.key[..k].copy_from_slice(&key[..k]);
    let Some(dst) = label.value.get_mut(..N) else {
        return Err(());
    };
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    unsafe { bpf_probe_read_user_buf(from as *const u8, dst) }.map_err(|_| ())?;
    let words = label.value.as_ptr().cast::<u64>();
    let mut any = 0;
    for i in 0..N / 8 {
        // SAFETY: `value` is 8-aligned and at least N bytes long.
        any |= unsafe { words.add(i).read() };
    }
    labels::add(c, k as u32, N as u32 | HEX_VALUE);
    Ok(any)
}

/// Copies the record's attributes (`key_index` u8, `len` u8, `len` bytes each), at most
/// `MAX_ATTRS`, each under its key's name; an attribute past them, or whose key the process's
/// key map does not name, is cut.
#[inline(always)]
fn attributes(c: &mut Copying, p: &ThreadCtxProc, record: u64, size: u64) -> Result<(), ()> {
    let size = size.min(MAX_ATTRS_BYTES);
    let mut off = 0u64;
    for _ in 0..MAX_ATTRS {
        if off + 2 > size {
            return Ok(());
        }
        let at = record + RECORD_HEADER_BYTES + off;
        // SAFETY: a user address; a fault makes the helper fail, which is handled.
        let [key, len]: [u8; 2] =
            unsafe { bpf_probe_read_user(at as *const [u8; 2]) }.map_err(|_| ())?;
        off += 2 + u64::from(len);
        let k = usize::from(key);
        if k >= MAX_KEYS || k as u32 >= p.key_count || c.set.count as usize >= MAX_LABELS {
            c.set.cut = 1;
            continue;
        }
        let Some(label) = labels::next(c) else {
            return Ok(());
        };
        let key_len = usize::from(p.key_lens[k]).min(KEY_BYTES);
        label.key = p.keys[k];
        let kept = usize::from(len).min(VALUE_BYTES);
        if kept > 0 {
            let Some(dst) = label.value.get_mut(..kept) else {
                return Err(());
            };
            // SAFETY: as above.
            unsafe { bpf_probe_read_user_buf((at + 2) as *const u8, dst) }.map_err(|_| ())?;
        }
        if kept < usize::from(len) {
            c.set.cut = 1;
        }
        labels::add(c, key_len as u32, kept as u32);
    }
    if off + 2 <= size {
        // More attributes than copied.
        c.set.cut = 1;
    }
    Ok(())
}
