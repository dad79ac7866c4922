//! The agent's own CPU and memory, from /proc/self, for the per-window self-report.

use std::time::Instant;

/// CPU share and resident memory since the previous sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// CPU time over wall time since the previous sample, percent of one CPU.
    pub cpu_percent: f64,
    /// Resident set size, MiB.
    pub rss_mib: f64,
}

/// Remembers the previous reading.
pub struct SelfStats {
    last_cpu: f64,
    last: Instant,
}

impl Default for SelfStats {
    fn default() -> Self {
        Self::new()
    }
}

impl SelfStats {
    /// Starts measuring now.
    pub fn new() -> Self {
        Self {
            last_cpu: cpu_seconds(),
            last: Instant::now(),
        }
    }

    /// Usage since the previous call.
    pub fn sample(&mut self) -> Usage {
        let cpu = cpu_seconds();
        let wall = self.last.elapsed().as_secs_f64();
        let usage = Usage {
            cpu_percent: if wall > 0.0 {
                100.0 * (cpu - self.last_cpu) / wall
            } else {
                0.0
            },
            rss_mib: rss_kib() as f64 / 1024.0,
        };
        self.last_cpu = cpu;
        self.last = Instant::now();
        usage
    }
}

/// User + system CPU seconds of this process.
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// Resident set size of this process, KiB.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
