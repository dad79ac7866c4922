//! The reusable sampling session shared by `sonde record` and the daemon: loads the kernel programs,
//! keeps the process table fed from kernel events, and turns each drained window into symbolized profiles.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use crate::{
    bpf::{
        BpfError,
        drain::{Drainer, RawWindow, WindowStats},
        loader::{self, Loaded},
        maps::AyaMaps,
        options::LoadOptions,
        runtime_programs::RuntimePrograms,
        sampling::Controller,
    },
    capture::{Capturer, events::EventThread},
    platform::kernel::KernelFeatures,
    process::CaptureStats,
    profile::{Profile, ProfileKind},
    runtimes::{RuntimeStats, registry},
    symbolize::{DebugInfoStats, Offender, PerfMapStats, SymbolizeStats, Symbolizer},
    targets::{TargetCounts, Targets},
    unwind::{UnwindStats, Unwinder},
};

/// How long `record` waits for the unwind tables of the processes it will sample before its window
/// starts.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long host-wide `record` lets the programs sample before it loads what they saw: at 99 Hz a
/// process busy on a CPU is sampled within 10 ms, one holding a twentieth of it within this span.
const WARM_UP: Duration = Duration::from_millis(150);

/// One window, symbolized.
#[derive(Debug)]
pub(crate) struct Window {
    /// On-CPU profile, when on-CPU sampling is enabled.
    pub on_cpu: Option<Profile>,
    /// Off-CPU profile, when off-CPU tracking is enabled.
    pub off_cpu: Option<Profile>,
    /// Kernel and drain counters of this window.
    pub stats: WindowStats,
    /// Processes forgotten after this window (they exited before it began).
    pub exited: Vec<u32>,
    /// Unwind tables at the end of the window (None when walking by frame pointer only).
    pub unwind: Option<UnwindStats>,
    /// The binaries with the most samples having unnamed frames in this window, and why.
    pub unsymbolized: Vec<Offender>,
    /// Debug file discovery and debuginfod counters so far.
    pub debug: DebugInfoStats,
    /// Symbolization counters so far.
    pub symbolize: SymbolizeStats,
    /// Process capture counters so far.
    pub capture: CaptureStats,
    /// Each runtime's counters so far: processes found, frames and binaries named.
    pub runtimes: RuntimeStats,
    /// Perf map counters so far.
    pub perf_maps: PerfMapStats,
    /// Processes held by the process table at the end of the window.
    pub processes_held: usize,
    /// The kernel side's cost so far.
    pub kernel_cost: KernelCost,
    /// How off-CPU episodes were sampled in this window (with off-CPU on).
    pub offcpu: Option<OffCpuSampling>,
    /// Targets kept and dropped at the end of the window.
    pub targets: TargetCounts,
    /// What the running kernel offers (probed once at load).
    pub kernel_features: Option<Arc<KernelFeatures>>,
}

/// How a window's off-CPU episodes were sampled: the budget and the inverse probabilities used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OffCpuSampling {
    /// `--offcpu-budget`: stack walks per CPU per second (0: every episode).
    pub budget: u32,
    /// Smallest and largest inverse probability used (1 when every episode was tracked).
    pub one_in_min: u32,
    pub one_in_max: u32,
}

/// What the kernel side has cost since loading.
#[derive(Clone, Debug, Default)]
pub(crate) struct KernelCost {
    /// Kernel memory of the maps, bytes.
    pub map_bytes: u64,
    /// The same by map name, largest first.
    pub maps: Vec<(String, u64)>,
    /// Runs, run time and verification of each program.
    pub programs: Vec<crate::bpf::cost::ProgramCost>,
    /// Run time of on-CPU samples by path, since start.
    pub samples: crate::bpf::cost::SampleCost,
}

impl KernelCost {
    /// Runs and run time of all programs.
    pub(crate) fn total(&self) -> (u64, Duration) {
        self.programs.iter().fold((0, Duration::ZERO), |(n, t), p| {
            (n + p.runs, t + p.run_time)
        })
    }
}

/// Windows over which the sweep for unreported exits reads the state of every process once (to find
/// zombies no parent reaps; a process `/proc` no longer lists is found sooner, see [`LIST_EVERY`]).
const SWEEP_SHARES: u32 = 16;
/// Windows between two reads of the `/proc` listing (a divisor of [`SWEEP_SHARES`]).
const LIST_EVERY: u32 = 4;

/// How many binaries with unnamed frames a window names.
const TOP_OFFENDERS: usize = 5;

/// A running sampling session.
pub(crate) struct Sampler {
    /// Shared with the event thread, which loads the runtimes' programs into it on demand.
    ebpf: Arc<Mutex<aya::Ebpf>>,
    drainer: Drainer<AyaMaps>,
    options: LoadOptions,
    procs: Arc<Mutex<Capturer>>,
    events: Option<EventThread>,
    unwinder: Option<Unwinder>,
    offcpu_sampling: Option<Controller>,
    symbolizer: Symbolizer,
    window_start: (SystemTime, Instant),
    /// Windows evicted so far: which share of the process table the next sweep checks.
    sweeps: u32,
    /// The BPF maps' memory, read again when the agent's descriptors change.
    map_memory: crate::bpf::cost::MapMemory,
    /// Keeps the kernel's BPF run-time statistics on while the sampler lives.
    _run_stats: Option<std::os::fd::OwnedFd>,
    /// What the running kernel offers, as the loader found it.
    features: Arc<KernelFeatures>,
    /// The relabel rules' targets (`sonde run`); None: every process, labelled as it is.
    targets: Option<Arc<Targets>>,
}

impl Sampler {
    /// Loads, attaches and starts consuming process events; `symbolizer` names the frames.
    /// `saved`: where built unwind tables are kept across restarts (`sonde run`), if anywhere.
    pub(crate) fn start(
        options: LoadOptions,
        mut symbolizer: Symbolizer,
        saved: Option<crate::unwind::saved::SavedTables>,
        targets: Option<Arc<Targets>>,
    ) -> Result<Self, BpfError> {
        let Loaded {
            ebpf,
            drainer,
            events,
            unwind,
            sampling,
            runtime_maps,
            runtime_arrays,
            kernel_names,
            features,
            targets: target_map,
        } = loader::load(&options)?;
        if let Some(targets) = &targets {
            targets.attach(target_map);
        }
        if let Some(names) = kernel_names {
            symbolizer.name_kernel_with(Box::new(names));
        }
        let ebpf = Arc::new(Mutex::new(ebpf));
        // Held by the event thread for the programs' lifetime: the arrays must stay open.
        let (on_cpu, off_cpu) = runtime_arrays;
        let programs = RuntimePrograms::new(ebpf.clone(), on_cpu, off_cpu);
        let offcpu_sampling = match (sampling, options.off_cpu) {
            (Some(maps), Some(off)) => Some(Controller::start(maps, off.budget)?),
            _ => None,
        };
        let table = Capturer::new(registry::captures(runtime_maps, &symbolizer.name_caches()));
        let procs = Arc::new(Mutex::new(table));
        let unwinder = unwind
            .map(|maps| Unwinder::start(maps, symbolizer.file_ids(), saved, options.runtimes));
        let events = Some(EventThread::spawn(
            events,
            procs.clone(),
            unwinder.as_ref().map(Unwinder::handle),
            programs,
            targets.clone(),
        ));
        let mut sampler = Self {
            ebpf,
            drainer,
            options,
            procs,
            events,
            unwinder,
            offcpu_sampling,
            symbolizer,
            window_start: (SystemTime::now(), Instant::now()),
            sweeps: 0,
            map_memory: Default::default(),
            _run_stats: crate::bpf::cost::enable_run_stats(),
            features: Arc::new(features),
            targets,
        };
        sampler.prepare();
        Ok(sampler)
    }

    /// Before the first window, captures the processes a recording is about to sample and loads
    /// their unwind tables, so their first samples are complete too: with a pid filter the named
    /// processes; host-wide (`sonde record`, one window), those the programs sample during
    /// [`WARM_UP`], which they announce as they would at any time. A node's long-lived programs (a
    /// JVM, Node.js) and the binaries its build loops run again and again are then known when the
    /// window opens, rather than walked by frame pointers, and their runtimes' frames unnamed, for the
    /// window's first seconds. What the programs recorded meanwhile is left out: its frame-pointer
    /// walks of binaries without frame pointers, a tenth of a short off-CPU recording's episodes.
    /// The loader sizes a single-window recording's maps for the slot after this drain.
    fn prepare(&mut self) {
        let host_wide = self.options.pids.is_empty();
        if host_wide && !self.options.single_window {
            return;
        }
        if let Some(unwinder) = &self.unwinder {
            if host_wide {
                std::thread::sleep(WARM_UP);
                // The event thread holds the table while it captures what was announced: its batch
                // is handed to the unwinder by the time the lock is free.
                drop(self.procs.lock().expect("process table lock"));
            } else {
                let mut procs = self.procs.lock().expect("process table lock");
                for pid in &self.options.pids {
                    if let Some(info) = procs.capture(*pid) {
                        unwinder.handle().process_changed(info);
                    }
                }
            }
            if !unwinder.settle(PREPARE_TIMEOUT) {
                tracing::warn!(
                    "unwind tables still building after {PREPARE_TIMEOUT:?}; early samples use frame pointers"
                );
            }
        }
        match self.drainer.next_window() {
            Ok(_) => self.window_start = (SystemTime::now(), Instant::now()),
            Err(err) => {
                tracing::warn!(%err, "samples taken while unwind tables loaded stay in the recording")
            }
        }
    }

    /// Ends the current window and returns it symbolized.
    pub(crate) fn window(&mut self) -> Result<Window, BpfError> {
        let raw = self.drainer.next_window()?;
        let (start_wall, start) = self.window_start;
        let now = Instant::now();
        self.window_start = (SystemTime::now(), now);
        let duration = now - start;
        if let Some(unwinder) = &self.unwinder {
            let mut pids: Vec<u32> = raw
                .on_cpu
                .iter()
                .chain(&raw.off_cpu)
                .map(|s| s.key.tgid)
                .collect();
            pids.sort_unstable();
            pids.dedup();
            unwinder.handle().sampled(pids);
        }
        let mut window = self.symbolize(raw, start_wall, duration);
        window.exited = self.evict(start);
        if let Some(targets) = &self.targets {
            window.targets = drop_targets(targets, &mut window);
        }
        crate::heap::release_freed();
        window.symbolize = self.symbolizer.stats();
        window.perf_maps = self.symbolizer.perf_map_stats();
        self.symbolizer.runtime_names(&mut window.runtimes);
        {
            let procs = self.procs.lock().expect("process table lock");
            window.capture = procs.stats();
            procs.runtime_processes(&mut window.runtimes);
            window.processes_held = procs.table().len();
        }
        let ebpf = self.ebpf.lock().expect("BPF object lock");
        let maps = self.map_memory.read().to_vec();
        window.kernel_cost = KernelCost {
            map_bytes: maps.iter().map(|(_, bytes)| bytes).sum(),
            maps,
            programs: crate::bpf::cost::program_costs(&ebpf),
            samples: crate::bpf::cost::SampleCost::read(&ebpf),
        };
        drop(ebpf);
        Ok(window)
    }

    /// Ends the last window of a recording. The unwinder stops first: the agent's own work at the
    /// end, which this window's drain and symbolization cause, would otherwise set it building
    /// tables no later window uses (the agent's own binary's: 340k rows, 70 ms and 7 MB of heap at
    /// the recording's peak of memory).
    pub(crate) fn last_window(&mut self) -> Result<Window, BpfError> {
        let unwind = self.unwinder.take().map(Unwinder::stop);
        let mut window = self.window()?;
        window.unwind = unwind;
        Ok(window)
    }

    fn symbolize(&mut self, raw: RawWindow, start: SystemTime, duration: Duration) -> Window {
        let time_nanos = crate::clock::unix_nanos(start);
        let mut procs = self.procs.lock().expect("process table lock");
        // Processes not yet captured are captured now if still alive.
        let infos = procs.ensure_all(raw.on_cpu.iter().chain(&raw.off_cpu).map(|s| s.key.tgid));
        drop(procs);
        let mut make = |kind: ProfileKind,
                        period: i64,
                        samples: &[crate::bpf::drain::RawSample],
                        notes: Vec<(String, String)>| Profile {
            kind,
            time_nanos,
            duration_nanos: duration.as_nanos() as i64,
            period,
            samples: self.symbolizer.symbolize(kind, samples, &infos, period),
            notes,
        };
        let on_cpu = self.options.frequency_hz.map(|hz| {
            make(
                ProfileKind::Cpu,
                1_000_000_000 / hz as i64,
                &raw.on_cpu,
                Vec::new(),
            )
        });
        let sampling = self.offcpu_sampling.as_ref().map(Controller::take_window);
        let offcpu = self.options.off_cpu.map(|off| OffCpuSampling {
            budget: off.budget,
            // Without a controller every episode is tracked.
            one_in_min: sampling.map_or(1, |w| w.one_in_min),
            one_in_max: sampling.map_or(1, |w| w.one_in_max),
        });
        let off_cpu = offcpu.map(|o| {
            make(
                ProfileKind::OffCpu,
                1,
                &raw.off_cpu,
                sampling_notes(o, &raw.stats),
            )
        });
        Window {
            on_cpu,
            off_cpu,
            stats: raw.stats,
            exited: Vec::new(),
            unwind: self.unwinder.as_ref().map(Unwinder::stats),
            unsymbolized: self.symbolizer.take_offenders(TOP_OFFENDERS),
            debug: self.symbolizer.debug_stats(),
            symbolize: SymbolizeStats::default(),
            capture: CaptureStats::default(),
            runtimes: RuntimeStats::default(),
            perf_maps: PerfMapStats::default(),
            processes_held: 0,
            kernel_cost: KernelCost::default(),
            offcpu,
            kernel_features: Some(self.features.clone()),
            targets: TargetCounts::default(),
        }
    }

    /// Forgets processes that exited before this window began, and symbols of binaries nobody maps.
    /// Processes whose exit was never reported (the leader exited first, the rest later; a lost
    /// event) are found gone by a sweep of /proc and forgotten a window later: every
    /// [`LIST_EVERY`] windows, those `/proc` no longer lists (one directory read); and a
    /// [`SWEEP_SHARES`]th of the table a window, in turn, by its state (a zombie leader with no
    /// thread left). A /proc read per live process and window was a tenth of the daemon's work with
    /// 1,000 services, for what the exit events already say of nearly every process.
    fn evict(&mut self, cutoff: Instant) -> Vec<u32> {
        let mut procs = self.procs.lock().expect("process table lock");
        let share = self.sweeps % SWEEP_SHARES;
        self.sweeps = self.sweeps.wrapping_add(1);
        // Read with the table locked: no process joins it between the listing and the checks. Every
        // LIST_EVERY windows: the directory read of 1,000 processes costs half of what the state
        // reads it replaces did.
        let listed = share
            .is_multiple_of(LIST_EVERY)
            .then(crate::process::listed_pids)
            .flatten();
        for pid in procs.table().live_pids() {
            let unlisted = listed.as_ref().is_some_and(|l| !l.contains(&pid));
            if unlisted || (pid % SWEEP_SHARES == share && crate::process::is_gone(pid)) {
                procs.mark_exited(pid, Instant::now());
                if let Some(unwinder) = &self.unwinder {
                    unwinder.handle().process_exited(pid);
                }
            }
        }
        let gone = procs.evict_exited_before(cutoff);
        if !gone.is_empty() {
            let live: HashSet<(u64, u64)> = procs.table().live_binaries();
            let live_pids: HashSet<u32> = procs.table().live_pids().into_iter().collect();
            self.symbolizer.retain(&live, &live_pids);
        }
        gone
    }

    /// Detaches everything.
    pub(crate) fn stop(mut self) {
        if let Some(events) = self.events.take() {
            events.stop();
        }
        if let Some(unwinder) = self.unwinder.take() {
            unwinder.stop();
        }
        if let Some(controller) = self.offcpu_sampling.take() {
            controller.stop();
        }
    }
}

/// The notes an off-CPU profile carries about how it was sampled (its pprof comments): the budget,
/// the inverse probabilities used, and the episodes tracked out of those seen.
fn sampling_notes(o: OffCpuSampling, stats: &WindowStats) -> Vec<(String, String)> {
    let k = &stats.kernel;
    [
        ("budget", o.budget.into()),
        ("switches", k[sonde_abi::stat::OFFCPU_ELIGIBLE as usize]),
        ("tracked", k[sonde_abi::stat::OFFCPU_SWITCH_OUT as usize]),
        ("one_in_min", o.one_in_min.into()),
        ("one_in_max", o.one_in_max.into()),
    ]
    .into_iter()
    .map(|(key, v): (&str, u64)| (format!("sonde.offcpu.{key}"), v.to_string()))
    .collect()
}

/// Removes the samples of targets the rules drop that were taken before the kernel had the
/// decision (a process's first samples, until the event thread decides), counting them; decides
/// for processes first seen at this drain; forgets the exited. Returns the counts after.
fn drop_targets(targets: &Targets, window: &mut Window) -> TargetCounts {
    let mut late = 0u64;
    for profile in [&mut window.on_cpu, &mut window.off_cpu]
        .into_iter()
        .flatten()
    {
        let mut kept = HashMap::new();
        profile.samples.retain(|s| {
            let keep = *kept
                .entry(s.pid)
                .or_insert_with(|| targets.get_or_decide(s.pid).kept());
            if !keep {
                late += s.values.first().copied().unwrap_or(0).max(0) as u64;
            }
            keep
        });
    }
    targets.count_late(late);
    targets.forget(&window.exited);
    targets.counts()
}
