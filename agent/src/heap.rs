//! The agent's heap: freed memory handed back to the kernel at the points where much was just freed.
//! glibc's allocator keeps freed memory mapped when live allocations sit above it, and each thread's
//! arena keeps its own: the BPF load (object, BTF, verifier logs) and each exported window (profiles,
//! their encoding) would otherwise stay in the agent's RSS as free heap.

/// Returns the free memory of every arena to the kernel. A few milliseconds at most; called after
/// the load and once per window, not on a hot path.
pub(crate) fn release_freed() {
    // SAFETY: glibc's malloc_trim has no preconditions; it only releases free memory.
    unsafe { libc::malloc_trim(0) };
}
