//! Loads the embedded eBPF object, sizes its maps for the job, attaches the programs and hands out the
//! drain and the process-event ring buffer.

use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData, PerCpuArray, PerCpuValues, ProgramArray, RingBuf},
    programs::{
        PerfEvent, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use sonde_abi::{
    Control, OffCpuSampling,
    names::{self, runtime_programs},
    unwind::MAX_RULES,
};

use crate::platform::kernel::{Feature, KernelFeatures, Programs};
use crate::runtimes::seam::RuntimeMaps;

use super::unwind_maps::{
    PAGES_PER_BLOCK, PageHash, RowChunks, UnwindMaps, UnwindMode, blocks_for_budget,
    chunks_for_blocks,
};
use super::{
    BpfError,
    drain::Drainer,
    kernel_log,
    load_globals::Globals,
    maps::{AyaMaps, map_err, take_map},
    object::{log_verified, object, typed_program},
    options::LoadOptions,
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
/// The legacy programs' maps are preallocated (see `Programs::Legacy`): their stack, aggregation and
/// process maps get this share of the full programs' sizes.
const LEGACY_SHARE: u32 = 4;
/// The program whose unloading ends the kernel log reader (loaded by every configuration).
const KERNEL_LOG_WATCHED: &str = "sonde_exit";

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
    /// The runtimes' per-process settings maps, for those whose kernel side is on.
    pub(crate) runtime_maps: RuntimeMaps,
    /// `ONCPU_RUNTIMES` and `OFFCPU_RUNTIMES`, for the programs enabled, holding the native
    /// walking programs; the runtimes' are loaded later, on demand ([`super::runtime_programs`]).
    /// Closing an array empties it, so they are held open for the programs' lifetime.
    pub(crate) runtime_arrays: (Option<ProgramArray<MapData>>, Option<ProgramArray<MapData>>),
    /// The kernel's own lookup of kernel frames' names, where the kernel allows it.
    pub(crate) kernel_names: Option<super::kernel_names::KernelNames>,
    /// What the running kernel offers, probed before loading.
    pub features: KernelFeatures,
    /// The relabel rules' decisions per process.
    pub(crate) targets: super::targets::TargetMap,
}

/// Loads and attaches according to `options`. Checks privileges first; a step the kernel refuses for
/// want of a capability is an error naming it.
pub fn load(options: &LoadOptions) -> Result<Loaded, BpfError> {
    privileges::check()?;
    privileges::warn_degraded();
    // Before anything is loaded: a kernel below the floor gets one error naming what it lacks, not
    // the verifier's complaint about the first program that uses it.
    let features = KernelFeatures::probe();
    features.check_floor()?;
    features.log();
    let programs = features.programs();
    let options = &options.for_programs(programs);
    // Preallocated maps are all charged at load, and before Linux 5.11 against RLIMIT_MEMLOCK.
    let share = match programs {
        Programs::Full => 1,
        Programs::Legacy => LEGACY_SHARE,
    };
    if features.charges_maps_to_memlock() {
        raise_memlock_limit();
    }
    // Process exec/exit and off-CPU tracking use classic tracepoints.
    let tracefs = tracefs::ensure_mounted()?;
    let layout = match options.off_cpu {
        Some(_) => Some(tracefs::sched_switch_layout(&tracefs)?),
        None => None,
    };

    let stacks = options.max_stacks / share;
    let stack_maps = stacks / 2;
    let (on_size, off_size) = match (options.frequency_hz, options.off_cpu) {
        (Some(_), Some(_)) => (stacks, stacks),
        (Some(_), None) => (stacks, 1),
        (None, _) => (1, stacks),
    };
    // A recording drains once before it starts (`Sampler::prepare`, what was sampled while the
    // tables of its processes loaded), so its one window is the second slot's.
    let single = options.single_window.then_some(1);
    let names = sizes_for(on_size, off_size, stack_maps, single);
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
    loader.map_max_entries(names::UNWIND_ROWS, chunks_for_blocks(blocks));
    loader.map_max_entries(
        names::UNWIND_RULES,
        if options.unwind == UnwindMode::Fp {
            1
        } else {
            MAX_RULES as u32
        },
    );
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
            _ => MAX_UNWIND_PROCESSES / share,
        },
    );
    let (file_tables, vma_processes) = match (options.unwind, programs) {
        (UnwindMode::Fp, _) => (1, 1),
        // The legacy programs record no mappings.
        (_, Programs::Legacy) => (MAX_FILE_TABLES, 1),
        (_, Programs::Full) => (MAX_FILE_TABLES, MAX_VMA_PROCESSES),
    };
    loader.map_max_entries(names::FILE_TABLES, file_tables);
    loader.map_max_entries(names::VMA_MAPPINGS, vma_processes);
    // A map shared by several sides (`SAMPLE_LABELS`: Go's labels, the thread context) keeps its
    // size while any of them is on.
    let used: Vec<&str> = options
        .kernel_sides()
        .filter(|(_, on)| *on)
        .flat_map(|(side, _)| side.other_maps.iter().copied())
        .collect();
    for (side, on) in options.kernel_sides() {
        if !on {
            for map in [side.procs_map]
                .iter()
                .chain(&side.files_map)
                .chain(side.other_maps.iter().filter(|m| !used.contains(m)))
            {
                loader.map_max_entries(map, 1);
            }
        }
    }
    globals.set(&mut loader);
    let mut ebpf = loader.load(object(programs)).map_err(|source| {
        privileges::refused(Step::Load, &source).unwrap_or(BpfError::Load { source })
    })?;
    // Parsed now: the runtimes' programs, loaded later, come from `ebpf`, not from these bytes.
    crate::heap::drop_resident(object(programs));

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
    let targets = super::targets::TargetMap::new(take_map(&mut ebpf, names::TARGETS)?);
    let unwind = match options.unwind {
        UnwindMode::Fp => None,
        _ => Some(UnwindMaps {
            rows: RowChunks::new(take_map(&mut ebpf, names::UNWIND_ROWS)?),
            rules: take_map(&mut ebpf, names::UNWIND_RULES)?,
            pages: PageHash::new(
                take_map(&mut ebpf, names::UNWIND_PAGES)?,
                blocks * PAGES_PER_BLOCK,
                programs,
            )
            .map_err(map_err(names::UNWIND_PAGES))?,
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
    let mut runtime_maps = RuntimeMaps::default();
    for (side, on) in options.kernel_sides() {
        if on {
            let take = |ebpf: &mut aya::Ebpf, name| {
                ebpf.take_map(name)
                    .ok_or_else(|| crate::bpf::maps::missing(name))
            };
            runtime_maps
                .procs
                .push((side.runtime, take(&mut ebpf, side.procs_map)?));
            if let Some(files) = side.files_map {
                runtime_maps
                    .files
                    .push((side.runtime, take(&mut ebpf, files)?));
            }
        }
    }
    // The attached programs dispatch to the walking programs through these arrays; the native
    // ones go in now, before anything is attached, the runtimes' on demand.
    let mut on_cpu_programs: Option<ProgramArray<MapData>> = match options.frequency_hz {
        Some(_) => Some(take_map(&mut ebpf, names::ONCPU_RUNTIMES)?),
        None => None,
    };
    let mut off_cpu_programs: Option<ProgramArray<MapData>> = match options.off_cpu {
        Some(_) => Some(take_map(&mut ebpf, names::OFFCPU_RUNTIMES)?),
        None => None,
    };
    for (array, names) in [
        (&mut on_cpu_programs, &runtime_programs::ON_CPU),
        (&mut off_cpu_programs, &runtime_programs::OFF_CPU),
    ] {
        if let Some(array) = array {
            let native = runtime_programs::NATIVE;
            super::runtime_programs::load_into(&mut ebpf, array, native, names[native as usize])?;
        }
    }
    let maps = AyaMaps::new(&mut ebpf)?;
    // The control block and the sampling settings are written before any program is attached.
    let drainer = Drainer::new(maps, Control::default())?;

    attach_tracepoint(&mut ebpf, "sonde_exec", "sched_process_exec")?;
    attach_tracepoint(&mut ebpf, "sonde_exit", "sched_process_exit")?;
    if globals.vma_layout.vm_file != 0 && programs == Programs::Full {
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
    let kernel_names = match features.has(Feature::Snprintf) {
        true => super::kernel_names::KernelNames::load(&mut ebpf),
        false => None,
    };
    if kernel_names.is_none() {
        privileges::warn_if_kallsyms_hidden();
    }
    crate::heap::release_freed();
    Ok(Loaded {
        ebpf,
        drainer,
        events,
        unwind,
        sampling,
        runtime_maps,
        runtime_arrays: (on_cpu_programs, off_cpu_programs),
        kernel_names,
        features,
        targets,
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

/// Lifts RLIMIT_MEMLOCK, which Linux charges BPF maps against before 5.11 (the legacy programs'
/// kernels); a refusal is said, and the load then names the map that did not fit.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) } != 0 {
        tracing::warn!(
            "cannot lift RLIMIT_MEMLOCK ({}): before Linux 5.11 BPF maps count against it; give sonde CAP_SYS_RESOURCE or LimitMEMLOCK=infinity (systemd)",
            std::io::Error::last_os_error()
        );
    }
}

/// The system page size (the unit of ring buffer sizes).
fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).unwrap_or(4096)
}

/// One deep user stack for this many user stacks of a slot: a deep stack takes 8 KiB, eight shallow
/// ones' worth, so the deep maps take half the shallow ones' memory when full.
const DEEP_SHARE: u32 = 16;

/// Map sizes per slot; `single`: the one slot a single-window recording uses (the others get one
/// entry).
fn sizes_for(on: u32, off: u32, stacks: u32, single: Option<u64>) -> Vec<(&'static str, u32)> {
    (0..sonde_abi::SLOTS)
        .flat_map(|s| {
            let (on, off, stacks) = if single.is_some_and(|used| used != s) {
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
                // Stacks past SHALLOW_STACK_DEPTH frames are a few of a window's (8 KiB each).
                (names::DEEP_USER_STACKS[s], (stacks / DEEP_SHARE).max(1)),
            ]
        })
        .collect()
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
    let prog: &mut TracePoint = typed_program(ebpf, program)?;
    let began = std::time::Instant::now();
    prog.load()
        .map_err(step_err(program, Step::ProgramLoad(program)))?;
    log_verified(program, prog.info().ok(), began);
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
    let prog: &mut PerfEvent = typed_program(ebpf, PROGRAM)?;
    let began = std::time::Instant::now();
    prog.load()
        .map_err(step_err(PROGRAM, Step::ProgramLoad(PROGRAM)))?;
    log_verified(PROGRAM, prog.info().ok(), began);
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

#[cfg(test)]
mod tests {
    use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
    use sonde_abi::names;

    use crate::platform::kernel::Programs;

    /// Symbols of the built eBPF object of `programs` in the section named `section`.
    fn symbols_in(programs: Programs, section: &str) -> Vec<String> {
        let file = object::File::parse(super::object(programs))
            .expect("the embedded eBPF object is an ELF");
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
        for programs in [Programs::Full, Programs::Legacy] {
            // Legacy map definitions, and BTF ones (`UNWIND_ROWS`, an array of arrays).
            let mut in_object = symbols_in(programs, "maps");
            in_object.extend(symbols_in(programs, ".maps"));
            in_object.sort();
            let mut declared: Vec<String> = names::ALL_MAPS.iter().map(|s| s.to_string()).collect();
            declared.sort();
            assert_eq!(in_object, declared, "{programs:?}");
        }
    }

    #[test]
    fn every_load_time_global_exists_in_read_only_data() {
        for programs in [Programs::Full, Programs::Legacy] {
            let rodata = symbols_in(programs, ".rodata");
            for global in names::globals::ALL {
                assert!(
                    rodata.iter().any(|s| s == global),
                    "{global} not in .rodata of the {programs:?} object: {rodata:?}"
                );
            }
        }
    }

    /// The legacy object calls none of the helpers Linux 5.10 lacks: the loader picks it by their
    /// absence. x86_64's only: arm64 loads the full programs (`arch::LEGACY_PROGRAMS`).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_legacy_object_calls_no_helper_of_later_kernels() {
        // bpf_get_current_task_btf (158), bpf_task_pt_regs (175), bpf_find_vma (180), bpf_loop
        // (181): `call imm` is opcode 0x85 with src_reg 0 (a helper, not a BPF-to-BPF call).
        let later: [i32; 4] = [158, 175, 180, 181];
        let calls = |programs: Programs| -> Vec<i32> {
            let file = object::File::parse(super::object(programs)).unwrap();
            let mut found = Vec::new();
            for section in file.sections() {
                let Ok(code) = section.data() else { continue };
                if section.kind() != object::SectionKind::Text {
                    continue;
                }
                for insn in code.chunks_exact(8) {
                    let imm = i32::from_le_bytes([insn[4], insn[5], insn[6], insn[7]]);
                    if insn[0] == 0x85 && insn[1] >> 4 == 0 && later.contains(&imm) {
                        found.push(imm);
                    }
                }
            }
            found
        };
        assert_eq!(calls(Programs::Legacy), Vec::<i32>::new());
        // The check reads what it means to: the full object calls each of them.
        let mut full = calls(Programs::Full);
        full.sort();
        full.dedup();
        assert_eq!(full, later);
    }
}
