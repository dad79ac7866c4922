//! The agent's heap: freed memory handed back to the kernel where much was just freed. glibc's
//! allocator keeps freed memory mapped when live allocations sit above it: what the BPF load frees
//! (object, BTF, verifier logs) would otherwise stay in the agent's RSS as free heap for its lifetime.

/// Returns the free memory of every arena to the kernel. A few milliseconds at most; called after
/// the load, not on a hot path.
pub(crate) fn release_freed() {
    // SAFETY: glibc's malloc_trim has no preconditions; it only releases free memory.
    unsafe { libc::malloc_trim(0) };
}
