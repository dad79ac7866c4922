//! A sample's label set, copied out of the process into a per-CPU scratch entry and stored in
//! `SAMPLE_LABELS` under a hash of its content, which goes into the sample's key: samples of the same
//! labels aggregate together, differently labelled ones apart. Shared by the two sources of labels
//! (`label_sources`), Go's goroutine labels (`go_labels`) and the OpenTelemetry thread context
//! (`thread_ctx`).

use aya_ebpf::{
    bindings::BPF_NOEXIST, helpers::bpf_probe_read_user_buf, macros::map, maps::PerCpuArray,
};
use sonde_abi::labels::{KEY_BYTES, Label, LabelSet, VALUE_BYTES};

use crate::{maps::SAMPLE_LABELS, unwind::mix};

/// Per-CPU label set being copied (1 KiB: too large for the BPF stack).
#[map]
static LABEL_SCRATCH: PerCpuArray<Copying> = PerCpuArray::with_max_entries(1, 0);

/// A label set being copied, with where its entries are (as its source reads them).
#[repr(C)]
pub struct Copying {
    pub set: LabelSet,
    /// Running hash of the copied content.
    pub hash: u64,
    /// Go's slice layout: the array of `{key, value}` string pairs; its map layout: the bucket
    /// array. A thread context: its record.
    pub base: u64,
    /// Go: entries, or buckets to read. A thread context: bytes of attributes.
    pub entries: u64,
    /// Go's map layout: the tophash bytes of the bucket being read.
    pub tophash: [u8; 8],
    pub layout: u32,
    pub fault: u32,
    /// Where a step's result passes to be forgotten by the verifier (`crate::verifier::forget`).
    pub opaque: u64,
}

/// This CPU's scratch entry, emptied.
#[inline(always)]
pub fn scratch() -> Option<*mut Copying> {
    let scratch = LABEL_SCRATCH.get_ptr_mut(0)?;
    // SAFETY: the per-CPU scratch entry is this program's alone while it runs.
    let c = unsafe { &mut *scratch };
    c.set.count = 0;
    c.set.cut = 0;
    c.hash = 0x9e37_79b9_7f4a_7c15;
    c.fault = 0;
    Some(scratch)
}

/// This CPU's scratch entry as it is (null if absent): the legacy object's loop steps look it up
/// again rather than take a pointer.
#[cfg(feature = "legacy")]
#[inline(always)]
pub fn current() -> *mut Copying {
    LABEL_SCRATCH
        .get_ptr_mut(0)
        .unwrap_or(core::ptr::null_mut())
}

/// Mixes `label`'s content into `c`'s hash and counts it in.
#[inline(always)]
pub fn add(c: &mut Copying, key_len: u32, value_len: u32) {
    let Some(label) = c.set.labels.get_mut(c.set.count as usize) else {
        return;
    };
    label.key_len = key_len;
    label.value_len = value_len;
    let h = hash_words(hash_words(c.hash, &label.key), &label.value);
    let lens = u64::from(key_len) << 32 | u64::from(value_len);
    c.hash = mix(h ^ lens, 0xc2b2_ae3d_27d4_eb4f);
    c.set.count += 1;
}

/// The label `c` fills next, its key and value zeroed; None when the set is full.
#[inline(always)]
pub fn next(c: &mut Copying) -> Option<&mut Label> {
    let label = c.set.labels.get_mut(c.set.count as usize)?;
    zero(&mut label.key);
    zero(&mut label.value);
    Some(label)
}

/// Stores `c`'s set in `SAMPLE_LABELS`: its key for the sample.
#[inline(always)]
pub fn store(c: &Copying) -> u64 {
    let id = match mix(c.hash ^ u64::from(c.set.count), 0xff51_afd7_ed55_8ccd) {
        0 => 1,
        id => id,
    };
    // An existing entry is the same content (its hash): looked up first, as an LRU map's update takes
    // a free node and copies the 1 KiB set before it finds the key there (and, short of free nodes,
    // evicts to get one), which cost several microseconds per sample of a long span.
    if SAMPLE_LABELS.get_ptr(&id).is_none() {
        // A full map evicts the least recently used.
        let _ = SAMPLE_LABELS.insert(&id, &c.set, BPF_NOEXIST as u64);
    }
    id
}

/// Copies the `len` bytes of the process at `ptr` into `out`, a key or value [`next`] zeroed: the
/// length kept, and whether it was cut.
#[inline(always)]
pub fn copy_user<const N: usize>(ptr: u64, len: u64, out: &mut [u8; N]) -> Result<(u32, bool), ()> {
    let kept = if len > N as u64 { N } else { len as usize };
    if kept > 0 {
        let Some(dst) = out.get_mut(..kept) else {
            return Err(());
        };
        // SAFETY: a user address; a fault makes the helper fail, which is handled.
        unsafe { bpf_probe_read_user_buf(ptr as *const u8, dst) }.map_err(|_| ())?;
    }
    Ok((kept as u32, len > N as u64))
}

/// Zeroes a key or value a word at a time: as bytes, the stores (and the verifier's walk of them)
/// were 8 times as many.
#[inline(always)]
fn zero<const N: usize>(out: &mut [u8; N]) {
    let words = out.as_mut_ptr().cast::<u64>();
    for i in 0..N / 8 {
        // SAFETY: `out` is a `Label`'s key or value: 8-aligned (see `sonde_abi::labels::Label`),
        // N / 8 words long.
        unsafe { words.add(i).write(0) };
    }
}

/// `h` with the 8-byte words of `bytes`, a `Label`'s key or value, mixed in.
#[inline(always)]
fn hash_words<const N: usize>(mut h: u64, bytes: &[u8; N]) -> u64 {
    let words = bytes.as_ptr().cast::<u64>();
    for i in 0..N / 8 {
        // SAFETY: as in `zero`: 8-aligned, N / 8 words long.
        h = mix(h ^ unsafe { words.add(i).read() }, 0x9e37_79b9_7f4a_7c15);
    }
    h
}

const _: () = assert!(KEY_BYTES % 8 == 0 && VALUE_BYTES % 8 == 0);
