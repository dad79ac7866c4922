//! What the kernel side costs: its maps' memory, its programs' run time (`bpf_stats`), and what one
//! on-CPU sample costs by path. For the last, the programs time themselves into `SAMPLE_COST` (a
//! per-CPU histogram per `sonde_abi::cost_path`), because `bpf_stats` gives one mean over every run of
//! a program (idle CPUs and filtered processes included), needs CAP_SYS_ADMIN, and cannot tell a Java
//! walk from a frame-pointer one. Read whole since start; each report's quantiles are over the
//! agent's lifetime, as `bpf_run_nanoseconds` is.

use std::time::Duration;

use aya::{
    Ebpf,
    maps::{MapData, PerCpuArray},
};
use sonde_abi::{cost_path, names};

const PATHS: usize = cost_path::COUNT as usize;
const BUCKETS: usize = cost_path::BUCKETS as usize;

/// Samples per run-time bucket, for each path, summed over CPUs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SampleCost {
    counts: Vec<[u64; BUCKETS]>,
}

impl Default for SampleCost {
    fn default() -> Self {
        Self {
            counts: vec![[0; BUCKETS]; PATHS],
        }
    }
}

/// The quantiles reports give, with their label.
pub(crate) const QUANTILES: [(&str, f64); 2] = [("p50", 0.5), ("p90", 0.9)];

impl SampleCost {
    /// Reads the histogram of the loaded object; empty when the map cannot be read (counted nowhere:
    /// it is a report of cost, not of samples).
    pub(crate) fn read(ebpf: &Ebpf) -> Self {
        let mut cost = Self::default();
        let Some(map) = ebpf.map(names::SAMPLE_COST) else {
            return cost;
        };
        let (Ok(array), Ok(cpus)) = (
            PerCpuArray::<&MapData, u64>::try_from(map),
            aya::util::nr_cpus(),
        ) else {
            return cost;
        };
        // One batch read: element by element it was PATHS x BUCKETS syscalls a window.
        let Ok(all) = super::batch::read_all_summed(
            aya::maps::IterableMap::map(&array),
            (PATHS * BUCKETS) as u32,
            cpus,
            names::SAMPLE_COST,
        ) else {
            return cost;
        };
        for (buckets, read) in cost.counts.iter_mut().zip(all.chunks(BUCKETS)) {
            buckets.copy_from_slice(read);
        }
        cost
    }

    /// Samples charged to `path`.
    pub(crate) fn samples(&self, path: u32) -> u64 {
        self.counts.get(path as usize).map_or(0, |b| b.iter().sum())
    }

    /// The `q` quantile of `path`'s run time, ns: the middle of the bucket holding it (the last bucket,
    /// "longer than the histogram", reads as its lower edge). None with no sample.
    pub(crate) fn quantile(&self, path: u32, q: f64) -> Option<f64> {
        let buckets = self.counts.get(path as usize)?;
        let total = self.samples(path);
        if total == 0 {
            return None;
        }
        let rank = (q * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        let width = cost_path::BUCKET_NS as f64;
        for (bucket, count) in buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let low = bucket as f64 * width;
                return Some(if bucket + 1 == BUCKETS {
                    low
                } else {
                    low + width / 2.0
                });
            }
        }
        None
    }

    /// Each path with samples, by name, with its quantiles: the series of the report.
    pub(crate) fn series(&self) -> Vec<(Vec<String>, f64)> {
        let mut out = Vec::new();
        for (path, name) in cost_path::NAMES.iter().enumerate() {
            for (label, q) in QUANTILES {
                if let Some(ns) = self.quantile(path as u32, q) {
                    out.push((vec![(*name).to_owned(), label.to_owned()], ns));
                }
            }
        }
        out
    }
}

/// [`map_memory`], read again only when this process's file descriptors changed (maps come and go
/// with the unwind tables' chunks), or after [`MapMemory::REFRESH_WINDOWS`] windows: reading every
/// descriptor's fdinfo and asking the kernel each map's name was ~5% of the daemon's CPU a window.
#[derive(Debug, Default)]
pub(crate) struct MapMemory {
    fds: Vec<u32>,
    maps: Vec<(String, u64)>,
    age: u32,
}

impl MapMemory {
    /// At most this many windows between two full reads (a descriptor number reused by another
    /// map leaves the set as it was).
    const REFRESH_WINDOWS: u32 = 12;

    /// The maps' memory now, by name, largest first.
    pub(crate) fn read(&mut self) -> &[(String, u64)] {
        let fds = open_fds();
        if fds.is_empty() || fds != self.fds || self.age >= Self::REFRESH_WINDOWS {
            self.maps = map_memory();
            self.fds = fds;
            self.age = 0;
        }
        self.age += 1;
        &self.maps
    }
}

/// This process's open file descriptors, in order.
fn open_fds() -> Vec<u32> {
    let dir = std::path::Path::new("/proc/self/fd");
    let mut fds: Vec<u32> = crate::process::numbered_entries(dir)
        .map(Iterator::collect)
        .unwrap_or_default();
    fds.sort_unstable();
    fds
}

/// Kernel memory held by this process's BPF maps, by map name (`memlock` of each map fd in
/// `/proc/self/fdinfo`), largest first. The maps userspace creates, the unwind rows' chunks (aya
/// names them `standalone_array`) and the unwind page hash (`standalone_hash`), are summed into
/// their outer map's name; a map without a name is `unnamed`.
fn map_memory() -> Vec<(String, u64)> {
    // Read by hand: procfs's FDInfo keeps only pos/flags/mnt_id, not the `memlock` and `map_id` a
    // BPF map's fdinfo adds.
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return Vec::new();
    };
    let mut by_name: std::collections::BTreeMap<String, u64> = Default::default();
    for info in dir
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
    {
        let Some((memlock, id)) = map_fdinfo(&info) else {
            continue;
        };
        let name = aya::maps::MapInfo::from_id(id)
            .ok()
            .and_then(|m| m.name_as_str().filter(|n| !n.is_empty()).map(str::to_owned))
            // The kernel keeps 15 bytes of a name: "standalone_arra".
            .map(|n| match n.as_str() {
                n if n.starts_with("standalone_hash") => names::UNWIND_PAGES.to_owned(),
                n if n.starts_with("standalone_") => names::UNWIND_ROWS.to_owned(),
                _ => n,
            })
            .unwrap_or_else(|| "unnamed".to_owned());
        *by_name.entry(name).or_default() += memlock;
    }
    let mut maps: Vec<(String, u64)> = by_name.into_iter().collect();
    maps.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    maps
}

/// `memlock` and `map_id` of a BPF map's fdinfo; `None` for any other file descriptor.
fn map_fdinfo(info: &str) -> Option<(u64, u32)> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    field("map_type:")?;
    Some((
        field("memlock:")?.parse().ok()?,
        field("map_id:")?.parse().ok()?,
    ))
}

/// What one loaded program has cost.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProgramCost {
    /// The program's name in the object.
    pub(crate) name: String,
    /// Runs and their run time (non-zero only while run-time statistics are on:
    /// [`enable_run_stats`], or `kernel.bpf_stats_enabled=1`).
    pub(crate) runs: u64,
    pub(crate) run_time: Duration,
    /// Instructions the verifier processed at load: what the agent's start costs in the kernel
    /// grows with it (0 where the kernel does not say, before 5.16: the figure leaves it out).
    pub(crate) verified_instructions: u32,
}

/// The cost of each loaded program, by program name.
pub(crate) fn program_costs(ebpf: &Ebpf) -> Vec<ProgramCost> {
    ebpf.programs()
        .filter_map(|(name, p)| p.info().ok().map(|info| (name, info)))
        .map(|(name, info)| ProgramCost {
            name: name.to_owned(),
            runs: info.run_count(),
            run_time: info.run_time(),
            verified_instructions: info.verified_instruction_count().unwrap_or(0),
        })
        .collect()
}

/// Turns on the kernel's run-time statistics of BPF programs for as long as the returned descriptor
/// lives (`BPF_ENABLE_STATS`), so no sysctl is left changed when the agent exits or dies. None when
/// the kernel refuses (it needs CAP_SYS_ADMIN, which sonde is not given): the figures then come from
/// `kernel.bpf_stats_enabled=1` when the host set it, and stay 0 (with a warning) otherwise.
pub(crate) fn enable_run_stats() -> Option<std::os::fd::OwnedFd> {
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => Some(fd),
        Err(_) if sysctl_stats_enabled() => None,
        Err(err) => {
            tracing::warn!(
                %err,
                "BPF run-time statistics unavailable, BPF overhead reads as 0: turning them on needs CAP_SYS_ADMIN; without it, set `sysctl kernel.bpf_stats_enabled=1` on the host"
            );
            None
        }
    }
}

/// Whether the host keeps BPF run-time statistics on (`kernel.bpf_stats_enabled`).
fn sysctl_stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|v| v.trim() == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(path: u32, buckets: &[(usize, u64)]) -> SampleCost {
        let mut cost = SampleCost::default();
        for &(bucket, n) in buckets {
            cost.counts[path as usize][bucket] = n;
        }
        cost
    }

    #[test]
    fn the_median_is_the_middle_of_the_bucket_holding_the_middle_sample() {
        // 10 samples at 1.0-1.25 µs, 10 at 7.5-7.75 µs, 1 beyond the histogram.
        let cost = with(cost_path::JAVA, &[(4, 10), (30, 10), (BUCKETS - 1, 1)]);
        assert_eq!(cost.samples(cost_path::JAVA), 21);
        assert_eq!(cost.quantile(cost_path::JAVA, 0.5), Some(7625.0));
        assert_eq!(cost.quantile(cost_path::JAVA, 0.4), Some(1125.0));
        assert_eq!(
            cost.quantile(cost_path::JAVA, 1.0),
            Some((BUCKETS - 1) as f64 * 250.0)
        );
        assert_eq!(cost.quantile(cost_path::V8, 0.5), None);
    }

    #[test]
    fn only_map_fdinfo_gives_memory_and_id() {
        // As /proc/PID/fdinfo shows a BPF map (6.x) and a plain file.
        let map = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t2087\nmap_type:\t1\n\
                   key_size:\t4\nvalue_size:\t8\nmax_entries:\t4096\nmap_flags:\t0x1\n\
                   map_extra:\t0x0\nmemlock:\t73728\nmap_id:\t812\nfrozen:\t0\n";
        assert_eq!(map_fdinfo(map), Some((73728, 812)));
        assert_eq!(
            map_fdinfo("pos:\t0\nflags:\t0100002\nmnt_id:\t25\nino:\t1\n"),
            None
        );
    }

    #[test]
    fn series_name_only_paths_with_samples() {
        let cost = with(cost_path::FRAME_POINTERS, &[(6, 3)]);
        assert_eq!(
            cost.series(),
            vec![
                (vec!["frame_pointers".into(), "p50".into()], 1625.0),
                (vec!["frame_pointers".into(), "p90".into()], 1625.0),
            ]
        );
    }
}
