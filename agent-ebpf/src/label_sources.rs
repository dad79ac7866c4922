//! Where a sample's labels come from: its goroutine's pprof labels in a Go process, else the span
//! its thread runs in, as a tracer published it (a process has at most one of them in practice).

/// The `SAMPLE_LABELS` key of a sample of `tgid` walked by `WALKER`'s program; 0 without labels.
#[inline(always)]
pub fn of_sample<const WALKER: u32>(tgid: u32) -> u64 {
    match crate::go_labels::of_sample::<WALKER>(tgid) {
        0 => crate::thread_ctx::of_sample(tgid),
        id => id,
    }
}
