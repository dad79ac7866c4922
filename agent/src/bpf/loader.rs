//! Loads the embedded eBPF object, sizes its maps for the job, attaches the programs and hands out the
//! drain and the process-event ring buffer.

use std::time::Duration;

use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, PerCpuValues, RingBuf},
    programs::{
        PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use sonde_abi::{
    Control, OffCpuKind, OffCpuSampling, names, names::globals, python::PyProc, unwind::MAX_RULES,
};

use super::unwind_maps::{PAGES_PER_BLOCK, UnwindMaps, UnwindMode, blocks_for_budget};
use super::{
    BpfError,
    drain::Drainer,
    kernel_log,
    maps::{AyaMaps, map_err, take_map},
    privileges::{self, Step},
    sampling::{LONG_NS_MIN, SamplingMaps, track_all},
    tracefs,
};

/// Processes with unwind mapping entries at once (each 8 KiB, allocated only when used).
const MAX_UNWIND_PROCESSES: u32 = 8192;
/// Binary files whose tables the kernel can find by device and inode (`FILE_TABLES`).
const MAX_FILE_TABLES: u32 = 8192;
/// Processes started since the agent began whose executable mappings the kernel records itself
/// (`VMA_MAPPINGS`; entries go at exit).
const MAX_VMA_PROCESSES: u32 = 8192;
/// Minimum time between two requests to re-read one process's mappings.
const REFRESH_INTERVAL: Duration = Duration::from_millis(500);
/// Test hook: when this variable is `1`, the exec program fails on every run (the `TEST_FAIL_EXEC`
/// global), so a test can see a kernel failure counted and logged. Not a user setting, and only read
/// by builds with the `test-hooks` feature.
#[cfg(feature = "test-hooks")]
const TEST_FAIL_EXEC_ENV: &str = "SONDE_TEST_FAIL_EXEC";
/// The program whose unloading ends the kernel log reader (loaded by every configuration).
const KERNEL_LOG_WATCHED: &str = "sonde_exit";

/// The eBPF object built by `build.rs` (aya-build) for this exact source tree.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sonde-ebpf"));

/// Off-CPU tracking settings.
#[derive(Clone, Copy, Debug)]
pub struct OffCpuOptions {
    /// Which episodes count.
    pub kind: OffCpuKind,
    /// Shorter episodes are counted as short and dropped.
    pub min_block: Duration,
    /// Stack walks per CPU per second (0: every episode is tracked).
    pub budget: u32,
}

/// Default `--offcpu-budget`, walks per CPU per second.
pub const DEFAULT_OFFCPU_BUDGET: u32 = 500;

/// Default `--max-unwind-table-mib`: the tables of about 200 distinct binaries of a busy node.
pub const DEFAULT_UNWIND_TABLE_MIB: u32 = 64;

/// What to load and how.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// On-CPU sampling frequency per CPU; None disables on-CPU sampling.
    pub frequency_hz: Option<u64>,
    /// Off-CPU tracking; None disables it.
    pub off_cpu: Option<OffCpuOptions>,
    /// Only these processes; all when empty.
    pub pids: Vec<u32>,
    /// Entries per aggregation map (per slot).
    pub max_stacks: u32,
    /// Only one window will be drained (`sonde record`): slots 1 and 2 are never written, so they get
    /// one entry each instead of full size (less kernel memory, faster start).
    pub single_window: bool,
    /// How user stacks are walked.
    pub unwind: UnwindMode,
    /// Kernel memory for unwind rows, MiB (allocated in full at load).
    pub max_unwind_table_mib: u32,
    /// Have the programs log their failed invocations (see [`super::kernel_log`]) even when the log
    /// filter does not enable `sonde::bpf::kernel` at debug level (the lines still go through it).
    pub kernel_log: bool,
    /// The runtimes that are on (`--runtimes`): Python frames are walked when `python` is.
    pub runtimes: crate::runtimes::Runtimes,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            frequency_hz: Some(99),
            off_cpu: None,
            pids: Vec::new(),
            max_stacks: 16384,
            single_window: false,
            unwind: UnwindMode::Auto,
            max_unwind_table_mib: DEFAULT_UNWIND_TABLE_MIB,
            kernel_log: false,
            runtimes: crate::runtimes::Runtimes::all(),
        }
    }
}

impl LoadOptions {
    fn walks_python(&self) -> bool {
        self.runtimes.has(crate::runtimes::Runtime::Python)
    }

    fn reads_go_labels(&self) -> bool {
        self.runtimes.has(crate::runtimes::Runtime::Go)
    }
}

/// A loaded and attached set of programs. Dropping it detaches everything.
pub struct Loaded {
    /// Keeps programs and links alive.
    pub ebpf: Ebpf,
    /// Window rotation and map reading.
    pub drainer: Drainer<AyaMaps>,
    /// Process lifecycle events (`sonde_abi::ProcEvent`).
    pub events: RingBuf<MapData>,
    /// The unwind tables' maps, unless unwinding by frame pointer only.
    pub(crate) unwind: Option<UnwindMaps>,
    /// The off-CPU sampling maps, when off-CPU time is tracked.
    pub sampling: Option<SamplingMaps>,
    /// `PY_PROCS`, when Python frames are walked.
    pub(crate) python: Option<HashMap<MapData, u32, PyProc>>,
    /// `GO_PROCS`, when goroutine labels are read.
    pub(crate) go: Option<HashMap<MapData, u32, sonde_abi::go::GoProc>>,
}

/// Loads and attaches according to `options`. Checks privileges first; a step the kernel refuses for
/// want of a capability is an error naming it.
pub fn load(options: &LoadOptions) -> Result<Loaded, BpfError> {
    privileges::check()?;
    privileges::warn_degraded();
    // Process exec/exit and off-CPU tracking use classic tracepoints.
    let tracefs = tracefs::ensure_mounted()?;
    let layout = match options.off_cpu {
        Some(_) => Some(tracefs::sched_switch_layout(&tracefs)?),
        None => None,
    };

    if options.unwind != UnwindMode::Fp && !cfg!(target_arch = "x86_64") {
        return Err(BpfError::UnwindUnsupported {
            arch: std::env::consts::ARCH,
        });
    }
    let stacks = options.max_stacks;
    let stack_maps = options.max_stacks / 2;
    let (on_size, off_size) = match (options.frequency_hz, options.off_cpu) {
        (Some(_), Some(_)) => (stacks, stacks),
        (Some(_), None) => (stacks, 1),
        (None, _) => (1, stacks),
    };
    let names = sizes_for(on_size, off_size, stack_maps, options.single_window);
    let globals = Globals::new(options, layout.as_ref(), &tracefs);
    let mut loader = EbpfLoader::new();
    for (name, size) in &names {
        loader.map_max_entries(name, *size);
    }
    loader.map_max_entries(names::PIDS, (options.pids.len() as u32).max(1));
    if options.off_cpu.is_none() {
        loader.map_max_entries(names::OFFCPU_START, 1);
    }
    let blocks = match options.unwind {
        UnwindMode::Fp => 1,
        _ => blocks_for_budget(u64::from(options.max_unwind_table_mib) << 20),
    };
    loader.map_max_entries(names::UNWIND_ROWS, blocks);
    loader.map_max_entries(
        names::UNWIND_RULES,
        if options.unwind == UnwindMode::Fp {
            1
        } else {
            MAX_RULES as u32
        },
    );
    loader.map_max_entries(names::UNWIND_PAGES, blocks * PAGES_PER_BLOCK);
    if globals.kernel_log == 0 {
        // Never written: the smallest ring buffer the kernel takes.
        loader.map_max_entries(names::AYA_LOGS, page_size());
    }
    // Not sized by `--pid`: processes other than the listed ones are captured too (a child a listed
    // process or a peer execs), and with room for only the listed pids such a process took a listed
    // one's entry, whose samples then all fell back to frame pointers. The map is not preallocated,
    // so room costs nothing until used.
    loader.map_max_entries(
        names::PROC_MAPPINGS,
        match options.unwind {
            UnwindMode::Fp => 1,
            _ => MAX_UNWIND_PROCESSES,
        },
    );
    let (file_tables, vma_processes) = match options.unwind {
        UnwindMode::Fp => (1, 1),
        _ => (MAX_FILE_TABLES, MAX_VMA_PROCESSES),
    };
    loader.map_max_entries(names::FILE_TABLES, file_tables);
    loader.map_max_entries(names::VMA_MAPPINGS, vma_processes);
    if !options.walks_python() {
        loader.map_max_entries(names::PY_PROCS, 1);
        loader.map_max_entries(names::PY_THREADS, 1);
    }
    if !options.reads_go_labels() {
        loader.map_max_entries(names::GO_PROCS, 1);
        loader.map_max_entries(names::GO_LABELS, 1);
    }
    globals.set(&mut loader);
    let mut ebpf = loader.load(OBJECT).map_err(|source| {
        privileges::refused(Step::Load, &source).unwrap_or(BpfError::Load { source })
    })?;

    if !options.pids.is_empty() {
        // Borrowed, not taken: a taken map is closed when dropped, and the programs reference it.
        let map = ebpf.map_mut(names::PIDS).ok_or_else(|| BpfError::Map {
            map: names::PIDS.into(),
            source: aya::maps::MapError::InvalidName {
                name: names::PIDS.into(),
            },
        })?;
        let mut pids: HashMap<&mut MapData, u32, u8> =
            HashMap::try_from(map).map_err(map_err(names::PIDS))?;
        for pid in &options.pids {
            pids.insert(pid, 1, 0).map_err(map_err(names::PIDS))?;
        }
    }
    let events: RingBuf<MapData> = take_map(&mut ebpf, names::PROC_EVENTS)?;
    let unwind = match options.unwind {
        UnwindMode::Fp => None,
        _ => Some(UnwindMaps {
            rows: take_map(&mut ebpf, names::UNWIND_ROWS)?,
            rules: take_map(&mut ebpf, names::UNWIND_RULES)?,
            pages: take_map(&mut ebpf, names::UNWIND_PAGES)?,
            procs: take_map(&mut ebpf, names::PROC_MAPPINGS)?,
            files: take_map(&mut ebpf, names::FILE_TABLES)?,
            capacity: blocks,
            budget_bytes: u64::from(options.max_unwind_table_mib) << 20,
        }),
    };
    let sampling = match options.off_cpu {
        Some(_) => Some(sampling_maps(&mut ebpf)?),
        None => None,
    };
    let python = match options.walks_python() {
        true => Some(take_map(&mut ebpf, names::PY_PROCS)?),
        false => None,
    };
    let go = match options.reads_go_labels() {
        true => Some(take_map(&mut ebpf, names::GO_PROCS)?),
        false => None,
    };
    let maps = AyaMaps::new(&mut ebpf)?;
    // The control block and the sampling settings are written before any program is attached.
    let drainer = Drainer::new(maps, Control::default())?;

    attach_tracepoint(&mut ebpf, "sonde_exec", "sched_process_exec")?;
    attach_tracepoint(&mut ebpf, "sonde_exit", "sched_process_exit")?;
    if globals.vma_layout.vm_file != 0 {
        attach_tracepoint_in(&mut ebpf, "sonde_mmap", "syscalls", "sys_exit_mmap")?;
        attach_tracepoint(&mut ebpf, "sonde_fork", "sched_process_fork")?;
    }
    if options.off_cpu.is_some() {
        attach_tracepoint(&mut ebpf, "sonde_off_cpu", "sched_switch")?;
    }
    if let Some(hz) = options.frequency_hz {
        attach_on_cpu(&mut ebpf, hz)?;
    }
    if globals.kernel_log != 0 {
        kernel_log::start(&mut ebpf, KERNEL_LOG_WATCHED);
    }
    Ok(Loaded {
        ebpf,
        drainer,
        events,
        unwind,
        sampling,
        python,
        go,
    })
}

/// Takes the sampling settings map, starting every CPU at "track everything", and a second handle on
/// the counters the controller reads.
fn sampling_maps(ebpf: &mut Ebpf) -> Result<SamplingMaps, BpfError> {
    // A duplicated descriptor, not the map's id: opening a map by id needs CAP_SYS_ADMIN.
    let stats = match ebpf.map(names::STATS) {
        Some(aya::maps::Map::PerCpuArray(data)) => {
            let fd = std::os::fd::AsFd::as_fd(data.fd())
                .try_clone_to_owned()
                .map_err(|e| map_err(names::STATS)(aya::maps::MapError::IoError(e)))?;
            MapData::from_fd(fd).map_err(map_err(names::STATS))?
        }
        _ => {
            return Err(BpfError::Map {
                map: names::STATS.into(),
                source: aya::maps::MapError::InvalidName {
                    name: names::STATS.into(),
                },
            });
        }
    };
    let mut sampling: PerCpuArray<MapData, OffCpuSampling> =
        take_map(ebpf, names::OFFCPU_SAMPLING)?;
    let cpus = aya::util::nr_cpus().map_err(|(path, _)| BpfError::OnlineCpus(path.to_owned()))?;
    let all = vec![track_all(LONG_NS_MIN); cpus];
    // One value per possible CPU: the conversion cannot fail.
    let values = PerCpuValues::try_from(all).expect("one value per possible CPU");
    sampling
        .set(0, values, 0)
        .map_err(map_err(names::OFFCPU_SAMPLING))?;
    Ok(SamplingMaps {
        sampling,
        process_switches: take_map(ebpf, names::OFFCPU_PROCESS_SWITCHES)?,
        process_sampling: take_map(ebpf, names::OFFCPU_PROCESS_SAMPLING)?,
        stats,
    })
}

/// Settings fixed while the programs run, loaded as read-only globals (see agent-ebpf `globals`).
struct Globals {
    filter_pids: u32,
    unwind_mode: u32,
    refresh_interval_ns: u64,
    min_block_ns: u64,
    offcpu_kind: u32,
    standard_layout: u32,
    record_base: u32,
    prev_pid_offset: u32,
    prev_state_offset: u32,
    next_pid_offset: u32,
    preempt_state_bit: u64,
    kernel_log: u32,
    test_fail_exec: u32,
    python: u32,
    go: u32,
    task_fsbase_offset: u32,
    vma_layout: sonde_abi::VmaLayout,
}

impl Globals {
    fn new(
        options: &LoadOptions,
        layout: Option<&tracefs::SchedSwitchLayout>,
        tracefs: &std::path::Path,
    ) -> Self {
        let off = options.off_cpu.zip(layout);
        Self {
            filter_pids: u32::from(!options.pids.is_empty()),
            unwind_mode: options.unwind.abi(),
            refresh_interval_ns: REFRESH_INTERVAL.as_nanos() as u64,
            min_block_ns: off.map_or(0, |(o, _)| o.min_block.as_nanos() as u64),
            offcpu_kind: off.map_or(0, |(o, _)| o.kind as u32),
            record_base: off.map_or(0, |(_, l)| l.read_base),
            standard_layout: off.map_or(0, |(_, l)| {
                u32::from((l.prev_pid, l.prev_state, l.next_pid) == (24, 32, 56))
            }),
            prev_pid_offset: off.map_or(0, |(_, l)| l.prev_pid),
            prev_state_offset: off.map_or(0, |(_, l)| l.prev_state),
            next_pid_offset: off.map_or(0, |(_, l)| l.next_pid),
            preempt_state_bit: off.map_or(0, |(_, l)| u64::from(l.preempt_bit)),
            kernel_log: u32::from(kernel_log::wanted(options.kernel_log)),
            test_fail_exec: u32::from(test_fail_exec()),
            python: u32::from(options.walks_python()),
            go: u32::from(options.reads_go_labels()),
            task_fsbase_offset: if options.walks_python() || options.reads_go_labels() {
                fsbase_offset()
            } else {
                0
            },
            vma_layout: if options.unwind == UnwindMode::Fp {
                sonde_abi::VmaLayout::default()
            } else {
                vma_layout(tracefs)
            },
        }
    }

    fn set<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader
            .override_global(globals::FILTER_PIDS, &self.filter_pids, true)
            .override_global(globals::UNWIND_MODE, &self.unwind_mode, true)
            .override_global(
                globals::REFRESH_INTERVAL_NS,
                &self.refresh_interval_ns,
                true,
            )
            .override_global(globals::MIN_BLOCK_NS, &self.min_block_ns, true)
            .override_global(globals::OFFCPU_KIND, &self.offcpu_kind, true)
            .override_global(globals::STANDARD_LAYOUT, &self.standard_layout, true)
            .override_global(globals::RECORD_BASE, &self.record_base, true)
            .override_global(globals::PREV_PID_OFFSET, &self.prev_pid_offset, true)
            .override_global(globals::PREV_STATE_OFFSET, &self.prev_state_offset, true)
            .override_global(globals::NEXT_PID_OFFSET, &self.next_pid_offset, true)
            .override_global(globals::PREEMPT_STATE_BIT, &self.preempt_state_bit, true)
            .override_global(globals::KERNEL_LOG, &self.kernel_log, true)
            .override_global(globals::TEST_FAIL_EXEC, &self.test_fail_exec, true)
            .override_global(globals::PYTHON, &self.python, true)
            .override_global(globals::GO, &self.go, true)
            .override_global(globals::TASK_FSBASE_OFFSET, &self.task_fsbase_offset, true)
            .override_global(globals::VMA_LAYOUT, &self.vma_layout, true);
    }
}

/// Where the kernel keeps a task's fs base, which recognises CPython 3.9/3.10 threads (their thread
/// states hold `pthread_self()`, the fs base, and no native thread id); 0 when unknown (x86_64 only).
fn fsbase_offset() -> u32 {
    if !cfg!(target_arch = "x86_64") {
        return 0;
    }
    match super::btf::task_fsbase_offset() {
        Ok(offset) => offset,
        Err(e) => {
            tracing::warn!("{e}: {}", super::btf::FSBASE_CONSEQUENCE);
            0
        }
    }
}

/// Offsets for recording the executable mappings of new processes in the kernel; all 0 (recording
/// off) when the kernel's BTF lacks them (x86_64 only).
fn vma_layout(tracefs: &std::path::Path) -> sonde_abi::VmaLayout {
    if !cfg!(target_arch = "x86_64") {
        return sonde_abi::VmaLayout::default();
    }
    let found = super::btf::vma_layout()
        .map_err(|e| e.to_string())
        .and_then(|layout| {
            let field = |category, event, field, size| {
                tracefs::field_offset(tracefs, category, event, field, size)
                    .map_err(|e| e.to_string())
            };
            Ok(sonde_abi::VmaLayout {
                fork_child_pid: field("sched", "sched_process_fork", "child_pid", 4)?,
                mmap_ret: field("syscalls", "sys_exit_mmap", "ret", 8)?,
                ..layout
            })
        });
    match found {
        Ok(layout) => layout,
        Err(e) => {
            tracing::warn!(
                "{e}: the kernel cannot record the mappings of new processes, so the first samples of \
                 each process (all of those living under a few tens of milliseconds) fall back to \
                 frame pointers"
            );
            sonde_abi::VmaLayout::default()
        }
    }
}

/// Whether the test hook `SONDE_TEST_FAIL_EXEC` is set (said loudly: it breaks process tracking).
fn test_fail_exec() -> bool {
    let set: Option<bool> = test_hook!(Some(
        std::env::var_os(TEST_FAIL_EXEC_ENV).is_some_and(|v| v == "1")
    ));
    let set = set.unwrap_or(false);
    if set {
        tracing::warn!("test hook SONDE_TEST_FAIL_EXEC=1: the exec program fails on every run");
    }
    set
}

/// The system page size (the unit of ring buffer sizes).
fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).unwrap_or(4096)
}

fn sizes_for(on: u32, off: u32, stacks: u32, single_window: bool) -> Vec<(&'static str, u32)> {
    (0..sonde_abi::SLOTS)
        .flat_map(|s| {
            let (on, off, stacks) = if single_window && s > 0 {
                (1, 1, 1)
            } else {
                (on, off, stacks)
            };
            let s = s as usize;
            [
                (names::ONCPU[s], on),
                (names::OFFCPU[s], off),
                (names::KERNEL_STACKS[s], stacks),
                (names::USER_STACKS[s], stacks),
            ]
        })
        .collect()
}

fn program_err(program: &'static str) -> impl Fn(aya::programs::ProgramError) -> BpfError {
    move |source| BpfError::Program { program, source }
}

/// Like [`program_err`], but a refusal of `step` names the capability it needs.
fn step_err(program: &'static str, step: Step) -> impl Fn(aya::programs::ProgramError) -> BpfError {
    move |source| {
        privileges::refused(step, &source).unwrap_or(BpfError::Program { program, source })
    }
}

fn attach_tracepoint(
    ebpf: &mut Ebpf,
    program: &'static str,
    event: &'static str,
) -> Result<(), BpfError> {
    attach_tracepoint_in(ebpf, program, "sched", event)
}

fn attach_tracepoint_in(
    ebpf: &mut Ebpf,
    program: &'static str,
    category: &str,
    event: &'static str,
) -> Result<(), BpfError> {
    let prog: &mut TracePoint = ebpf
        .program_mut(program)
        .ok_or(aya::programs::ProgramError::UnexpectedProgramType)
        .and_then(TryInto::try_into)
        .map_err(program_err(program))?;
    prog.load()
        .map_err(step_err(program, Step::ProgramLoad(program)))?;
    prog.attach(category, event).map_err(|source| {
        // aya reads the tracepoint's id from tracefs, then opens a perf event on it.
        let step = match source {
            aya::programs::ProgramError::TracePointError(_) => Step::TracepointId(event),
            _ => Step::TracepointAttach(event),
        };
        step_err(program, step)(source)
    })?;
    Ok(())
}

fn attach_on_cpu(ebpf: &mut Ebpf, hz: u64) -> Result<(), BpfError> {
    const PROGRAM: &str = "sonde_on_cpu";
    let prog: &mut PerfEvent = ebpf
        .program_mut(PROGRAM)
        .ok_or(aya::programs::ProgramError::UnexpectedProgramType)
        .and_then(TryInto::try_into)
        .map_err(program_err(PROGRAM))?;
    prog.load()
        .map_err(step_err(PROGRAM, Step::ProgramLoad(PROGRAM)))?;
    let cpus =
        aya::util::online_cpus().map_err(|(path, _)| BpfError::OnlineCpus(path.to_owned()))?;
    for cpu in cpus {
        prog.attach(
            PerfEventConfig::Software(SoftwareEvent::CpuClock),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Frequency(hz),
            true,
        )
        .map_err(step_err(PROGRAM, Step::PerfEventOpen))?;
    }
    Ok(())
}

/// Kernel memory held by this process's BPF maps, from `/proc/self/fdinfo` (`memlock` of each map fd).
pub fn map_memory_bytes() -> u64 {
    // Read by hand: procfs's FDInfo keeps only pos/flags/mnt_id, not the `memlock` a BPF map's
    // fdinfo adds.
    let Ok(dir) = std::fs::read_dir("/proc/self/fdinfo") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter(|info| info.contains("map_type:"))
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Run count and run time of each loaded program, by program name (non-zero only while run-time
/// statistics are on: [`enable_run_stats`], or `kernel.bpf_stats_enabled=1`).
pub fn program_run_stats_by_name(ebpf: &Ebpf) -> Vec<(String, u64, Duration)> {
    ebpf.programs()
        .filter_map(|(name, p)| p.info().ok().map(|info| (name, info)))
        .map(|(name, info)| (name.to_owned(), info.run_count(), info.run_time()))
        .collect()
}

/// Turns on the kernel's run-time statistics of BPF programs for as long as the returned descriptor
/// lives (`BPF_ENABLE_STATS`), so no sysctl is left changed when the agent exits or dies. None when
/// the kernel refuses (it needs CAP_SYS_ADMIN, which sonde is not given): the figures then come from
/// `kernel.bpf_stats_enabled=1` when the host set it, and stay 0 (with a warning) otherwise.
pub fn enable_run_stats() -> Option<std::os::fd::OwnedFd> {
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
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    use sonde_abi::names;

    /// Symbols of the built eBPF object in the section named `section`.
    fn symbols_in(section: &str) -> Vec<String> {
        let file = object::File::parse(super::OBJECT).expect("the embedded eBPF object is an ELF");
        let index = file
            .section_by_name(section)
            .unwrap_or_else(|| panic!("no {section} section in the eBPF object"))
            .index();
        file.symbols()
            .filter(|s| s.section_index() == Some(index))
            .filter_map(|s| s.name().ok().map(str::to_owned))
            .collect()
    }

    #[test]
    fn every_shared_map_name_is_a_map_of_the_object_and_the_reverse() {
        let mut in_object = symbols_in("maps");
        in_object.sort();
        let mut declared: Vec<String> = names::ALL_MAPS.iter().map(|s| s.to_string()).collect();
        declared.sort();
        assert_eq!(in_object, declared);
    }

    #[test]
    fn every_load_time_global_exists_in_read_only_data() {
        let rodata = symbols_in(".rodata");
        for global in names::globals::ALL {
            assert!(
                rodata.iter().any(|s| s == global),
                "{global} not in .rodata: {rodata:?}"
            );
        }
    }
}
