//! The agent's own CPU time and memory, through `procfs`.

/// CPU seconds (user + system) and resident bytes of this process; zeros when /proc cannot be read.
pub fn agent_usage() -> (f64, u64) {
    let Ok(me) = procfs::process::Process::myself() else {
        return (0.0, 0);
    };
    let cpu = me
        .stat()
        .map(|s| (s.utime + s.stime) as f64 / procfs::ticks_per_second() as f64)
        .unwrap_or(0.0);
    let rss = me
        .status()
        .ok()
        .and_then(|s| s.vmrss)
        .map_or(0, |kib| kib * 1024);
    (cpu, rss)
}

/// CPUs the host has online: the capacity overhead is a share of. Not `available_parallelism`, which
/// is the agent's own cgroup quota or affinity, not the host's.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}
