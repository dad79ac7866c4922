//! Sample labels a runtime publishes (Go's goroutine labels, from `runtime/pprof`): the set the
//! kernel copies out of the process into `SAMPLE_LABELS` under a hash of its content, which goes into
//! the sample's key ([`crate::SampleKey::labels`]).

/// Most labels copied per sample; a goroutine with more has the rest cut (counted).
pub const MAX_LABELS: usize = 10;
/// Bytes of a key kept; longer keys are cut (counted).
pub const KEY_BYTES: usize = 32;
/// Bytes of a value kept; longer values are cut (counted).
pub const VALUE_BYTES: usize = 64;
/// Set in [`Label::value_len`]: the value is raw bytes (a span's ids), which userspace writes in
/// lowercase hex; the length is the rest.
pub const HEX_VALUE: u32 = 1 << 31;

/// One label, NUL padded. 8-aligned, so the kernel zeroes and hashes key and value a word at a time
/// (they start at offsets 8 and 40).
#[repr(C, align(8))]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Label {
    /// Bytes of `key` used.
    pub key_len: u32,
    /// Bytes of `value` used.
    pub value_len: u32,
    /// The key, cut to [`KEY_BYTES`].
    pub key: [u8; KEY_BYTES],
    /// The value, cut to [`VALUE_BYTES`].
    pub value: [u8; VALUE_BYTES],
}
const _: () = assert!(core::mem::size_of::<Label>() == 8 + KEY_BYTES + VALUE_BYTES);
const _: () = assert!(core::mem::align_of::<Label>() == 8 && KEY_BYTES.is_multiple_of(8));

/// Value of `SAMPLE_LABELS`, keyed by a hash of its content ([`crate::SampleKey::labels`]).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LabelSet {
    /// Labels used.
    pub count: u32,
    /// Non-zero when labels, keys or values were cut to fit.
    pub cut: u32,
    /// The labels, in the order the process keeps them.
    pub labels: [Label; MAX_LABELS],
}
const _: () = assert!(core::mem::size_of::<LabelSet>() == 8 + MAX_LABELS * 104);
