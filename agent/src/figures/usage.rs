//! The agent's own CPU time and memory, through `procfs`, read once per window.

/// The agent process's usage now; zeros where /proc cannot be read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Usage {
    /// CPU seconds, user + system.
    pub cpu_seconds: f64,
    /// Resident memory, and its peak, anonymous and file-backed parts.
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
}

impl Usage {
    /// This process's usage now.
    pub(crate) fn now() -> Self {
        let Ok(me) = procfs::process::Process::myself() else {
            return Self::default();
        };
        let cpu_seconds = me
            .stat()
            .map(|s| (s.utime + s.stime) as f64 / procfs::ticks_per_second() as f64)
            .unwrap_or(0.0);
        let status = me.status().ok();
        let bytes = |f: fn(&procfs::process::Status) -> Option<u64>| {
            status.as_ref().and_then(f).map_or(0, |kib| kib * 1024)
        };
        Self {
            cpu_seconds,
            rss_bytes: bytes(|s| s.vmrss),
            peak_rss_bytes: bytes(|s| s.vmhwm),
            anon_bytes: bytes(|s| s.rssanon),
            file_bytes: bytes(|s| s.rssfile),
        }
    }
}

/// CPUs the host has online: the capacity overhead is a share of. Not `available_parallelism`, which
/// is the agent's own cgroup quota or affinity, not the host's.
pub(crate) fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}
