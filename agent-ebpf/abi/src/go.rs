//! Goroutine labels (`runtime/pprof.Do`, `SetGoroutineLabels`): the per-process settings the kernel
//! finds the sampled goroutine's labels with, and the label set it copies out of the process.
//!
//! The chain, as Go's own profiler reads it in `sigprof` (x86_64): the thread's `g` at
//! `fs_base + tls_offset`, its `m` at `g + g_m`, the goroutine the M runs at `m + m_curg` (not `g`
//! itself: in a signal handler or on the system stack `g` is `gsignal` or `g0`), and its labels at
//! `curg + g_labels`. Offsets come per Go version from the binary's `.go.buildinfo`.

pub use crate::labels::{KEY_BYTES, LabelSet, MAX_LABELS, VALUE_BYTES};

/// [`GoProc::layout`]: Go 1.17-1.23, `g.labels` points at a `map[string]string` variable (a pointer
/// to the map's `hmap`).
pub const LABELS_MAP: u32 = 1;
/// [`GoProc::layout`]: Go 1.24+, `g.labels` points at a slice header of `{key, value string}` pairs.
pub const LABELS_SLICE: u32 = 2;

/// `hmap.B` (log2 of the bucket count) and `hmap.buckets` (runtime/map.go, Go 1.17-1.23).
pub const HMAP_LOG2_BUCKETS: u64 = 9;
/// See [`HMAP_LOG2_BUCKETS`].
pub const HMAP_BUCKETS: u64 = 16;
/// Size of a `map[string]string` bucket: 8 tophash bytes, 8 keys, 8 values (strings, 16 bytes
/// each), the overflow pointer.
pub const MAP_BUCKET_BYTES: u64 = 272;
/// Buckets read: a map of up to 13 labels has at most 2 (load factor 6.5); more are cut.
pub const MAP_BUCKETS_READ: u64 = 2;
/// Smallest tophash of a filled slot (`minTopHash`; below: empty or evacuated).
pub const MIN_TOP_HASH: u8 = 5;

/// [`GoProc::layout`]: the labels of this Go version are not read (only its roots are known).
pub const LABELS_NONE: u32 = 0;

/// Go functions a frame-pointer walk of a Go thread ends in: `runtime.goexit` (every goroutine),
/// `runtime.mstart` (a thread's g0 stack), `runtime.rt0_go` (the process's first thread), and the
/// switches to the system stack where Go's own tracebacks end too (`systemstack`, `mcall`,
/// `morestack`). Go marks no outermost frame for unwinders (no `.eh_frame`, a zero frame pointer
/// also ends chains cut short), so the walk is a complete one only when it ends in one of these.
pub const ROOT_FUNCTIONS: usize = 6;

/// A function's link-time address range `[start, end)`; both 0 when the binary lacks it.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct GoRange {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
}

/// Value of `GO_PROCS`, keyed by tgid: where a Go process keeps its goroutines' labels, and where
/// its walks end.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct GoProc {
    /// Offset of the `g` pointer from the thread's fs base (x86_64 TLS; -8 for most binaries).
    pub tls_offset: i32,
    /// [`LABELS_MAP`], [`LABELS_SLICE`] or [`LABELS_NONE`].
    pub layout: u32,
    /// Offset of `runtime.g.m`.
    pub g_m: u32,
    /// Offset of `runtime.m.curg`.
    pub m_curg: u32,
    /// Offset of `runtime.g.labels`.
    pub g_labels: u32,
    /// Reserved, 0.
    pub _pad: u32,
    /// Run-time address minus link-time address of the executable (0 unless built as a PIE).
    pub bias: u64,
    /// Link-time ranges of the [`ROOT_FUNCTIONS`].
    pub roots: [GoRange; ROOT_FUNCTIONS],
}
const _: () = assert!(core::mem::size_of::<GoProc>() == 32 + 16 * ROOT_FUNCTIONS);
