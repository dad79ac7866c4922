//! What a profiler process used: CPU and peak RSS from wait4, its BPF programs' runs and maps from
//! its fdinfo, and its output; and one profiler run around one workload run (`Measured`), whole and
//! while the workload ran.

use std::{process::Child, time::Duration};

use super::cpus;

use anyhow::{Context as _, bail};

/// What a profiler process cost, from wait4 and its fdinfo.
pub(crate) struct Usage {
    /// User + system CPU of the process (its BPF programs not included).
    pub(crate) cpu: Duration,
    pub(crate) max_rss_kib: i64,
    /// BPF programs and maps of the profiler, read just before it was stopped.
    pub(crate) bpf: Option<BpfUsage>,
    /// Everything it printed on stdout.
    pub(crate) stdout: String,
    pub(crate) status: std::process::ExitStatus,
}

/// BPF objects a process holds, summed from /proc/PID/fdinfo (run times need
/// `kernel.bpf_stats_enabled=1`).
#[derive(Clone, Copy, Default)]
pub(crate) struct BpfUsage {
    /// Invocations of all its programs.
    pub(crate) runs: u64,
    /// Run time of all its programs, ns.
    pub(crate) run_ns: u64,
    /// Invocations of its perf-event (sampling) programs: one per timer tick per CPU.
    pub(crate) sampling_runs: u64,
    /// Run time of its perf-event programs, ns.
    pub(crate) sampling_ns: u64,
    /// Kernel memory of its maps (memlock).
    pub(crate) map_bytes: u64,
    /// Instructions the verifier processed to load its programs (`verified_insns`): what its start
    /// costs the kernel.
    pub(crate) verified_insns: u64,
}

/// `prog_type` of perf-event programs in fdinfo (`BPF_PROG_TYPE_PERF_EVENT` in linux/bpf.h).
const PROG_TYPE_PERF_EVENT: u64 = 7;

/// Sums run count, run time and map memory over the BPF objects `pid` holds (from /proc/PID/fdinfo).
pub(crate) fn bpf_usage(pid: u32) -> Option<BpfUsage> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fdinfo")).ok()?;
    let mut total = BpfUsage::default();
    for entry in dir.flatten() {
        let Ok(info) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let field = |k: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if info.contains("prog_type:") {
            let (runs, ns) = (
                field("run_cnt:").unwrap_or(0),
                field("run_time_ns:").unwrap_or(0),
            );
            total.runs += runs;
            total.run_ns += ns;
            total.verified_insns += field("verified_insns:").unwrap_or(0);
            if field("prog_type:") == Some(PROG_TYPE_PERF_EVENT) {
                total.sampling_runs += runs;
                total.sampling_ns += ns;
            }
        } else if info.contains("map_type:") {
            total.map_bytes += field("memlock:").unwrap_or(0);
        }
    }
    Some(total)
}

impl BpfUsage {
    /// What was used from `before` to `after` (map memory as of `after`); zero when either is unknown.
    pub(crate) fn between(before: Option<BpfUsage>, after: Option<BpfUsage>) -> BpfUsage {
        match (before, after) {
            (Some(b), Some(a)) => BpfUsage {
                runs: a.runs - b.runs,
                run_ns: a.run_ns - b.run_ns,
                sampling_runs: a.sampling_runs - b.sampling_runs,
                sampling_ns: a.sampling_ns - b.sampling_ns,
                map_bytes: a.map_bytes,
                verified_insns: a.verified_insns,
            },
            _ => BpfUsage::default(),
        }
    }
}

/// User + system CPU of a running process so far (/proc/PID/stat).
pub(crate) fn cpu_of(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Some(Duration::from_millis(ticks * 1000 / hz.max(1)))
}

/// Stops a profiler started with piped stdout by SIGINT and waits for it (it may flush for a while).
pub(crate) fn stop(child: Child) -> anyhow::Result<Usage> {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    wait_usage(child)
}

/// Whether a child has exited, leaving it unreaped so wait4 still gets its resource usage.
pub(crate) fn has_exited(pid: u32) -> bool {
    // SAFETY: zeroed siginfo_t is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waiting (without reaping) for our own child with a valid out-pointer.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled the fields it reports, and si_pid stays 0 while the child runs.
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Waits for a child started with piped stdout and returns its resource usage and output.
pub(crate) fn wait_usage(child: Child) -> anyhow::Result<Usage> {
    let pid = child.id() as i32;
    let mut stdout = child.stdout.context("child stdout was not piped")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } != pid {
        bail!("wait4 failed for pid {pid}");
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    // Read on a thread so a chatty profiler never blocks on a full pipe while we wait for it.
    let stdout = reader.join().unwrap_or_default();
    Ok(Usage {
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss,
        bpf: None,
        stdout,
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
    })
}

/// One profiler run around one workload run.
pub(crate) struct Measured {
    /// The workload's wall time.
    pub(crate) wall: Duration,
    /// The profiler's lifetime, from its start to its exit.
    pub(crate) window: Duration,
    pub(crate) usage: Usage,
    /// Context switches of the whole machine (`/proc/stat`) from the profiler's start to the read of
    /// its BPF run time: the switches its sched_switch programs had to handle, if it has any.
    pub(crate) switches: u64,
    /// What the profiler used while the workload ran (None when its /proc entry could not be read).
    pub(crate) during: Option<Span>,
}

/// A profiler's use over the workload's run: from 3 s after its start (every profiler here has
/// attached by then) to the workload's end, so its start (for sonde, mostly the kernel verifying its
/// programs) and its shutdown (writing and symbolizing its output) are left out, for every profiler
/// alike. What an always-on profiler costs a host is this; the whole run's figure is printed beside.
pub(crate) struct Span {
    pub(crate) wall: Duration,
    /// User + system CPU (clock ticks, 10 ms).
    pub(crate) cpu: Duration,
    pub(crate) bpf: BpfUsage,
    /// CPU the profiler had used before the span: its start.
    pub(crate) cpu_before: Duration,
}

impl Measured {
    /// User + system CPU plus its BPF programs' run time over the profiler's lifetime, in percent of
    /// all CPUs: the cost of the whole run, start and shutdown included.
    pub(crate) fn machine_percent(&self) -> f64 {
        let bpf_s = self
            .usage
            .bpf
            .filter(|b| b.runs > 0)
            .map_or(0.0, |b| b.run_ns as f64 / 1e9);
        100.0 * (self.usage.cpu.as_secs_f64() + bpf_s) / self.window.as_secs_f64() / cpus() as f64
    }

    /// The same over the workload's run only ([`Span`]), in percent of all CPUs.
    pub(crate) fn profiling_percent(&self) -> Option<f64> {
        let d = self.during.as_ref()?;
        let bpf_s = d.bpf.run_ns as f64 / 1e9;
        Some(100.0 * (d.cpu.as_secs_f64() + bpf_s) / d.wall.as_secs_f64() / cpus() as f64)
    }

    /// CPU seconds the profiler used before the workload started: its start.
    pub(crate) fn start_cpu(&self) -> Option<f64> {
        self.during.as_ref().map(|d| d.cpu_before.as_secs_f64())
    }
}
