//! The OpenTelemetry thread context (OTEP 4947): a tracer publishes the span a thread runs in a
//! thread-local pointer, `otel_thread_ctx_v1`, to a [record](RECORD_HEADER_BYTES); the kernel reads
//! it at each sample of a process userspace described in `TC_PROCS` and stores the trace id, span id
//! and attributes as the sample's label set (`crate::labels`, as Go's labels are).
//!
//! Where the variable is for a thread is the dynamic linker's business: userspace reads where the
//! linker put the variable's module (its TLSDESC, DTPMOD64 or TPOFF64 slot, after relocation) and
//! describes it here as an offset from the thread pointer, or as a module index into the thread's
//! dynamic thread vector (DTV) and an offset into that module's block.

use crate::{labels::KEY_BYTES, tls::TlsPlace};

/// Bytes of a record before its attributes: `trace_id[16]`, `span_id[8]`, `valid` u8,
/// `trace_flags` u8, `attrs_data_size` u16.
pub const RECORD_HEADER_BYTES: u64 = 28;
/// The attribute bytes the kernel looks at: the OTEP's reader limit (a 640-byte record).
pub const MAX_ATTRS_BYTES: u64 = 612;
/// Attributes copied per sample (after `trace_id` and `span_id`); more are cut (counted).
pub const MAX_ATTRS: usize = 4;
/// Attribute keys a process's key map may name ([`ThreadCtxProc::keys`]); an attribute whose index
/// is past them is dropped (counted as cut).
pub const MAX_KEYS: usize = 8;

/// Value of `TC_PROCS`, keyed by tgid: where a process's threads keep `otel_thread_ctx_v1`, and the
/// names of its attribute keys (the process context's `threadlocal.attribute_key_map`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ThreadCtxProc {
    /// Where its threads keep `otel_thread_ctx_v1`.
    pub place: TlsPlace,
    /// Keys named in [`Self::keys`].
    pub key_count: u32,
    /// Bytes used of each key.
    pub key_lens: [u8; MAX_KEYS],
    /// The attribute keys, by index, NUL padded.
    pub keys: [[u8; KEY_BYTES]; MAX_KEYS],
    pub _pad: u32,
}
const _: () =
    assert!(core::mem::size_of::<ThreadCtxProc>() == 40 + MAX_KEYS + MAX_KEYS * KEY_BYTES);

impl Default for ThreadCtxProc {
    fn default() -> Self {
        Self {
            place: TlsPlace::default(),
            key_count: 0,
            key_lens: [0; MAX_KEYS],
            keys: [[0; KEY_BYTES]; MAX_KEYS],
            _pad: 0,
        }
    }
}

/// Label keys the kernel gives a record's ids (Parca's and Pyroscope's span-profile names), in
/// lowercase hex.
pub const TRACE_ID_LABEL: &str = "trace_id";
/// See [`TRACE_ID_LABEL`].
pub const SPAN_ID_LABEL: &str = "span_id";
