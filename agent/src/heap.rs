//! The agent's memory: freed heap handed back to the kernel where much was just freed, one malloc
//! arena, and read-only data used once dropped from the resident set. glibc's allocator keeps freed
//! memory mapped when live allocations sit above it: what the BPF load frees (object, BTF, verifier
//! logs) would otherwise stay in the agent's RSS as free heap for its lifetime.

/// One malloc arena for every thread. glibc gives each thread that allocates while another holds
/// the main arena an arena of its own (up to 8 per CPU), and each keeps its own free memory and
/// fragments: with the agent's seven threads the daemon's anonymous memory was 29 MB for 19 MB of
/// live heap, 21 MB with one arena. The agent's threads allocate a few thousand times a second at
/// most, so they hardly ever wait for one another's lock. Called first thing in `main`, before any
/// thread starts (arenas already made stay).
pub fn one_arena() {
    // SAFETY: mallopt only changes the allocator's tuning; M_ARENA_MAX takes any positive value.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

/// Returns the free memory of every arena to the kernel. Called after the load and at the end of
/// every window: a window's symbolization and encoding free most of what they allocated, and glibc
/// kept it (the daemon with four workloads: 20.5 MB of heap resident for ~12 MB live; 11.8 MB with
/// this). A millisecond or so per window; the pages freed come back as minor faults when the next
/// window needs them.
pub(crate) fn release_freed() {
    // SAFETY: glibc's malloc_trim has no preconditions; it only releases free memory.
    unsafe { libc::malloc_trim(0) };
}

/// Drops the pages of `data`, read-only data of the agent's own binary read once (the embedded
/// eBPF object after the load), from the resident set. They are clean pages of the executable's
/// file: a later read faults them in again from it, so nothing is lost, while they no longer count
/// in the agent's RSS (nor, in a container, in its memory cgroup's usage).
pub(crate) fn drop_resident(data: &'static [u8]) {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        size if size > 0 => size as usize,
        _ => return,
    };
    let start = (data.as_ptr() as usize).next_multiple_of(page);
    let end = (data.as_ptr() as usize + data.len()) / page * page;
    if end <= start {
        return;
    }
    // SAFETY: the range lies inside a `'static` read-only slice of the binary's own mapping, whole
    // pages only; MADV_DONTNEED on a private file mapping never written discards nothing that the
    // file does not hold.
    let ret =
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    if ret != 0 {
        tracing::debug!(err = %std::io::Error::last_os_error(), "dropping read-once pages failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DATA: [u8; 3 * 4096] = [7; 3 * 4096];

    #[test]
    fn dropped_pages_read_back_the_same() {
        drop_resident(&DATA);
        assert!(DATA.iter().all(|b| *b == 7));
    }
}
