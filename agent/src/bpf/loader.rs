//! Loads the embedded eBPF object, sizes its maps for the job, attaches the programs and hands out the
//! drain and the process-event ring buffer.

use std::time::Duration;

use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, RingBuf},
    programs::{
        PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use sonde_abi::{Control, OffCpuKind};

use super::{
    BpfError,
    drain::Drainer,
    maps::{AyaMaps, take_map},
    tracefs,
};

/// The eBPF object built by `build.rs` (aya-build) for this exact source tree.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sonde-ebpf"));

/// Off-CPU tracking settings.
#[derive(Clone, Copy, Debug)]
pub struct OffCpuOptions {
    /// Which episodes count.
    pub kind: OffCpuKind,
    /// Shorter episodes are counted as short and dropped.
    pub min_block: Duration,
}

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
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            frequency_hz: Some(99),
            off_cpu: None,
            pids: Vec::new(),
            max_stacks: 16384,
            single_window: false,
        }
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
}

/// Loads and attaches according to `options`. Checks privileges first.
pub fn load(options: &LoadOptions) -> Result<Loaded, BpfError> {
    super::privileges::check()?;
    // Process exec/exit and off-CPU tracking use classic tracepoints.
    let tracefs = tracefs::ensure_mounted()?;
    let layout = match options.off_cpu {
        Some(_) => Some(tracefs::sched_switch_layout(&tracefs)?),
        None => None,
    };

    let stacks = options.max_stacks;
    let stack_maps = options.max_stacks / 2;
    let (on_size, off_size) = match (options.frequency_hz, options.off_cpu) {
        (Some(_), Some(_)) => (stacks, stacks),
        (Some(_), None) => (stacks, 1),
        (None, _) => (1, stacks),
    };
    let names = sizes_for(on_size, off_size, stack_maps, options.single_window);
    let mut loader = EbpfLoader::new();
    for (name, size) in &names {
        loader.map_max_entries(name, *size);
    }
    loader.map_max_entries("PIDS", (options.pids.len() as u32).max(1));
    if options.off_cpu.is_none() {
        loader.map_max_entries("OFFCPU_START", 1);
    }
    let mut ebpf = loader
        .load(OBJECT)
        .map_err(|source| BpfError::Load { source })?;

    if !options.pids.is_empty() {
        // Borrowed, not taken: a taken map is closed when dropped, and the programs reference it.
        let map = ebpf.map_mut("PIDS").ok_or_else(|| BpfError::Map {
            map: "PIDS".into(),
            source: aya::maps::MapError::InvalidName {
                name: "PIDS".into(),
            },
        })?;
        let mut pids: HashMap<&mut aya::maps::MapData, u32, u8> =
            HashMap::try_from(map).map_err(|source| BpfError::Map {
                map: "PIDS".into(),
                source,
            })?;
        for pid in &options.pids {
            pids.insert(pid, 1, 0).map_err(|source| BpfError::Map {
                map: "PIDS".into(),
                source,
            })?;
        }
    }
    let events: RingBuf<MapData> = take_map(&mut ebpf, "PROC_EVENTS")?;
    let maps = AyaMaps::new(&mut ebpf)?;
    let mut control = Control {
        filter_pids: u32::from(!options.pids.is_empty()),
        ..Default::default()
    };
    if let (Some(off), Some(layout)) = (options.off_cpu, layout) {
        control.min_block_ns = off.min_block.as_nanos() as u64;
        control.offcpu_kind = off.kind as u32;
        control.prev_pid_offset = layout.prev_pid;
        control.prev_state_offset = layout.prev_state;
        control.next_pid_offset = layout.next_pid;
        control.preempt_state_bit = layout.preempt_bit;
    }
    // The control block is written before any program is attached.
    let drainer = Drainer::new(maps, control)?;

    attach_tracepoint(&mut ebpf, "sonde_exec", "sched_process_exec")?;
    attach_tracepoint(&mut ebpf, "sonde_exit", "sched_process_exit")?;
    if options.off_cpu.is_some() {
        attach_tracepoint(&mut ebpf, "sonde_off_cpu", "sched_switch")?;
    }
    if let Some(hz) = options.frequency_hz {
        attach_on_cpu(&mut ebpf, hz)?;
    }
    Ok(Loaded {
        ebpf,
        drainer,
        events,
    })
}

fn sizes_for(on: u32, off: u32, stacks: u32, single_window: bool) -> Vec<(String, u32)> {
    (0..sonde_abi::SLOTS)
        .flat_map(|s| {
            let (on, off, stacks) = if single_window && s > 0 {
                (1, 1, 1)
            } else {
                (on, off, stacks)
            };
            [
                (format!("ONCPU_{s}"), on),
                (format!("OFFCPU_{s}"), off),
                (format!("STACKS_{s}"), stacks),
            ]
        })
        .collect()
}

fn program_err(program: &'static str) -> impl Fn(aya::programs::ProgramError) -> BpfError {
    move |source| BpfError::Program { program, source }
}

fn attach_tracepoint(ebpf: &mut Ebpf, program: &'static str, event: &str) -> Result<(), BpfError> {
    let prog: &mut TracePoint = ebpf
        .program_mut(program)
        .ok_or(aya::programs::ProgramError::UnexpectedProgramType)
        .and_then(TryInto::try_into)
        .map_err(program_err(program))?;
    prog.load().map_err(program_err(program))?;
    prog.attach("sched", event).map_err(program_err(program))?;
    Ok(())
}

fn attach_on_cpu(ebpf: &mut Ebpf, hz: u64) -> Result<(), BpfError> {
    const PROGRAM: &str = "sonde_on_cpu";
    let prog: &mut PerfEvent = ebpf
        .program_mut(PROGRAM)
        .ok_or(aya::programs::ProgramError::UnexpectedProgramType)
        .and_then(TryInto::try_into)
        .map_err(program_err(PROGRAM))?;
    prog.load().map_err(program_err(PROGRAM))?;
    let cpus =
        aya::util::online_cpus().map_err(|(path, _)| BpfError::OnlineCpus(path.to_owned()))?;
    for cpu in cpus {
        prog.attach(
            PerfEventConfig::Software(SoftwareEvent::CpuClock),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Frequency(hz),
            true,
        )
        .map_err(program_err(PROGRAM))?;
    }
    Ok(())
}

/// Kernel memory held by this process's BPF maps, from `/proc/self/fdinfo` (`memlock` of each map fd).
pub fn map_memory_bytes() -> u64 {
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

/// Run count and total run time of the loaded programs (non-zero only with `kernel.bpf_stats_enabled=1`).
pub fn program_run_stats(ebpf: &Ebpf) -> (u64, Duration) {
    ebpf.programs()
        .filter_map(|(_, p)| p.info().ok())
        .fold((0, Duration::ZERO), |(n, t), info| {
            (n + info.run_count(), t + info.run_time())
        })
}
