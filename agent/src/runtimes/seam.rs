//! The runtime seam: what every language runtime does as processes come and go, one trait each
//! `runtimes/<lang>/` implements and `registry.rs` lists. The capture layer (`crate::capture`) calls
//! it for every process; nothing outside `runtimes/` knows which runtimes there are.
//!
//! A runtime found in a process is kept in the process's [`ProcessInfo`] as an opaque instance
//! (the data model below knows no runtime), under the runtime's name; the runtime's own code reads
//! it back by type (`python::interpreter_of`, `hotspot::jvm_of`, `v8::node_of`).

use std::{any::Any, collections::HashSet, path::Path, sync::Arc, time::Instant};

use aya::maps::{HashMap, Map, MapData};
use sonde_abi::{ProcEvent, runtime_frame::RuntimeFrame};

use super::{FrameTally, Outcome, ProcessCounts, Runtime, TableStats, figures::RuntimeFigure};
use crate::{
    process::{Binary, ElfReader, ProcessInfo, RuntimeInstance},
    profile::{Frame, Symbol},
};

/// Everything one runtime plugs in, declared in its own folder (`runtimes/<lang>/register.rs`) and
/// listed once in `registry.rs`: the rest of the agent reaches a runtime only through these.
pub(crate) struct Registration {
    pub(crate) runtime: Runtime,
    /// Its kernel side, for the loader to size, switch and hand over.
    pub(crate) kernel: KernelSide,
    /// What it reads of a binary as the binary is first opened.
    pub(crate) elf: ElfReader,
    /// Its figures, and the help of the shared `/metrics` families they are series of.
    pub(crate) figures: &'static [RuntimeFigure],
    pub(crate) families: &'static [(&'static str, &'static str)],
    /// Fuzz targets of its parsers of process memory (`cargo xtask fuzz --target`), by name.
    pub(crate) fuzz: &'static [FuzzTarget],
    /// Its own unwind rows for the code of a binary (Go's SP deltas), where it has them: they
    /// override the binary's CFI wherever both cover an address.
    pub(crate) unwind: Option<UnwindRows>,
    /// Where code it runs in a mapping with no unwind table of its own unwinds as (JIT code on its
    /// loop's native frame), for the processes it was found in.
    pub(crate) unwind_as: Option<UnwindAs>,
    /// What it reads of a process's executable to say what the process is, if it can.
    pub(crate) identify: Option<fn(&Path) -> Option<ExeIdentity>>,
    /// The resource attributes a process published of itself through the runtime (a tracer's
    /// process context), by pid: empty when it published none.
    pub(crate) resource: Option<PublishedResource>,
    /// A new cache of what it reads of processes, shared by its capture (which fills it as the
    /// kernel announces objects) and its namer.
    pub(crate) cache: fn() -> RuntimeCache,
    /// Its namer, naming from `cache`.
    pub(crate) namer: fn(&RuntimeCache) -> Box<dyn RuntimeNames>,
    /// Its capture, publishing to its settings map taken from `maps`; None when the map is absent
    /// (its kernel side is off).
    pub(crate) capture: fn(&mut RuntimeMaps, &RuntimeCache) -> Option<Box<dyn RuntimeCapture>>,
    /// Its capture handing nothing to the kernel, for tests that capture without loading the
    /// programs; None when it cannot work without its map.
    #[cfg(test)]
    pub(crate) capture_without_kernel: Option<CaptureWithoutKernel>,
}

/// The resource attributes process `pid` published through a runtime, key and value.
pub(crate) type PublishedResource = fn(u32) -> Vec<(String, String)>;

/// A runtime's unwind rows for `binary`'s code: None when it is not the runtime's, or it has none.
pub(crate) type UnwindRows = fn(&Binary) -> Option<Vec<CodeRows>>;

/// How the frames of mapping `m` of `process` unwind; None when `m` is not the runtime's code.
pub(crate) type UnwindAs = fn(&ProcessInfo, &crate::process::Mapping) -> Option<JitFrame>;

/// How the frame of a runtime's code in a mapping with no unwind table of its own unwinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JitFrame {
    /// On its interpreter loop's native frame (PHP's JIT): with the rule the table of the binary at
    /// `process.mappings[binary]` holds at link-time address `address`, for every address of `m`.
    OnLoop { binary: usize, address: u64 },
    /// In a frame of its own whose shape is the same wherever it runs (YJIT 3.1's entry frame):
    /// this rule, an architecture's (`platform::arch`).
    Fixed(sonde_abi::UnwindRule),
}

/// The unwind rows of one function, as a CFI FDE gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CodeRows {
    /// Its link-time range `[start, end)`.
    pub(crate) start: u32,
    pub(crate) end: u32,
    /// Its rows, by increasing pc, the first at `start`.
    pub(crate) rows: Vec<sonde_abi::UnwindRow>,
}

/// A fuzz target: its name and its entry point.
pub(crate) type FuzzTarget = (&'static str, fn(&[u8]));

/// A runtime's capture that hands nothing to the kernel (tests).
#[cfg(test)]
pub(crate) type CaptureWithoutKernel = fn(&RuntimeCache) -> Box<dyn RuntimeCapture>;

/// One runtime's cache, of the runtime's own type (read back with [`cache_of`]).
pub(crate) type RuntimeCache = Arc<dyn Any + Send + Sync>;

/// `cache` as the runtime's own type `T`.
pub(crate) fn cache_of<T: Send + Sync + 'static>(cache: &RuntimeCache) -> Arc<T> {
    cache.clone().downcast::<T>().unwrap_or_else(|_| {
        panic!(
            "a runtime's cache is not the {} it made",
            std::any::type_name::<T>()
        )
    })
}

/// The settings maps the loader took for the runtimes whose kernel side is on, by runtime: per
/// process (`PY_PROCS`, ...) and per binary (`PY_FILES`); each runtime's capture types its own.
#[derive(Default)]
pub(crate) struct RuntimeMaps {
    pub(crate) procs: Vec<(Runtime, Map)>,
    pub(crate) files: Vec<(Runtime, Map)>,
}

impl RuntimeMaps {
    /// The per-process map of `runtime` as the hash it is, if its kernel side is on.
    pub(crate) fn take<V: aya::Pod>(
        &mut self,
        runtime: Runtime,
    ) -> Option<HashMap<MapData, u32, V>> {
        take_hash(&mut self.procs, runtime)
    }

    /// The per-binary map of `runtime` (`KernelSide::files_map`), if it has one and is on.
    pub(crate) fn take_files<V: aya::Pod>(
        &mut self,
        runtime: Runtime,
    ) -> Option<HashMap<MapData, sonde_abi::FileKey, V>> {
        take_hash(&mut self.files, runtime)
    }
}

fn take_hash<K: aya::Pod, V: aya::Pod>(
    maps: &mut Vec<(Runtime, Map)>,
    runtime: Runtime,
) -> Option<HashMap<MapData, K, V>> {
    let at = maps.iter().position(|(r, _)| *r == runtime)?;
    let (_, map) = maps.swap_remove(at);
    match HashMap::try_from(map) {
        Ok(map) => Some(map),
        Err(err) => {
            tracing::warn!(
                runtime = runtime.name(),
                "its settings map is not the hash it should be ({err}): the runtime is off"
            );
            None
        }
    }
}

/// An event of the kernel's `PROC_EVENTS` ring as its record held it: the event, and what the kernel
/// copied after it, taken as the walk saw the object it announces (a `PYTHON_CODE` record's
/// strings, `sonde_abi::python::CodeEvent`); empty for most kinds.
#[derive(Clone, Debug)]
pub(crate) struct RingEvent {
    pub(crate) head: ProcEvent,
    pub(crate) copied: Box<[u8]>,
}

impl RingEvent {
    /// The event of a ring record; None for a record shorter than an event.
    pub(crate) fn from_record(record: &[u8]) -> Option<Self> {
        let copied = record.get(std::mem::size_of::<ProcEvent>()..)?;
        // SAFETY: the kernel wrote a ProcEvent (repr(C), plain data) at the record's start, which
        // holds one (checked above); read unaligned from the ring.
        let head = unsafe { std::ptr::read_unaligned(record.as_ptr().cast::<ProcEvent>()) };
        Some(Self {
            head,
            copied: copied.into(),
        })
    }
}

/// One language runtime's side of process capture.
pub(crate) trait RuntimeCapture: Send {
    /// The runtime.
    fn runtime(&self) -> Runtime;

    /// The runtime's name (`--runtimes`), under which its instances are kept.
    fn name(&self) -> &'static str {
        self.runtime().name()
    }

    /// `process` was just read (first seen, after an exec, or again after new code was mapped):
    /// looks for the runtime in it and keeps the kernel's settings in step (written, or removed when
    /// the process runs no such runtime now). `previous`: what this runtime found in the same
    /// process image before, kept when it is still the same. Counts what it finds in `counts`.
    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance>;

    /// `pid` exited: nothing of it may outlive it in the kernel.
    fn exited(&mut self, pid: u32);

    /// `pid` is forgotten: its per-process state goes.
    fn evicted(&mut self, pid: u32);

    /// Processes this runtime wants captured again at `now` (one that was starting): none by default.
    fn due(&mut self, _now: Instant) -> Vec<u32> {
        Vec::new()
    }

    /// The runtime's kernel program (`sonde_abi::names::runtime_programs` index), once a process
    /// whose stacks need it was handed to the kernel.
    fn program_needed(&self) -> Option<u32> {
        None
    }

    /// The kernel announced `event` (a code object, a runtime frame) in `pid`, which runs this
    /// runtime as `instance`: read what it names now, while it lives. False when the event is not
    /// this runtime's.
    fn announced(&mut self, _pid: u32, _instance: &RuntimeInstance, _event: &RingEvent) -> bool {
        false
    }
}

/// One language runtime's side of symbolization: the frames it names from what the kernel stored
/// (in place among the native frames, or appended after them) and the native code it names better
/// than ELF symbols. The symbolizer calls every registered one and knows none by name. Methods taking
/// `&self` lock the runtime's caches (shared with its capture, which fills them as the kernel
/// announces code) for the call.
pub(crate) trait RuntimeNames: Send {
    /// The runtime whose frames these are.
    fn runtime(&self) -> Runtime;

    /// Whether in-place runtime frames of `kind` (`sonde_abi::runtime_frame::kind`) are this
    /// runtime's.
    fn owns(&self, _kind: u64) -> bool {
        false
    }

    /// Before a batch is named: reads what the runtime frames of stack `ips` of `process` need,
    /// unless cached, so each object is read once however many stacks hold it.
    fn resolve(&self, _process: &ProcessInfo, _ips: &[u64]) {}

    /// The frame of in-place `frame` (one of this runtime's kinds) of `process`, and how naming
    /// went; `native` names an address as native code (frames that hold a pc). None: nothing can
    /// name it (the process runs no such runtime known to sonde), and it is dropped.
    fn frame(
        &self,
        _process: Option<&ProcessInfo>,
        _frame: RuntimeFrame,
        _native: &dyn Fn(u64) -> Frame,
    ) -> Option<(Frame, Outcome)> {
        None
    }

    /// Names for `offsets` of `binary`, when this runtime describes that binary's code better than
    /// ELF symbols (one inline chain each, innermost first; empty where it covers nothing, left to
    /// ELF symbols); None when the binary is not its.
    fn native_chains(&mut self, _binary: &Binary, _offsets: &[u64]) -> Option<Vec<Arc<[Symbol]>>> {
        None
    }

    /// `native` (leaf to root) with the frames this runtime's walker appended to stack `ips` of
    /// `process` merged in where they ran, counted in `tally`.
    fn merge(
        &self,
        _process: Option<&ProcessInfo>,
        _ips: &[u64],
        native: Vec<Frame>,
        _tally: &mut FrameTally,
    ) -> Vec<Frame> {
        native
    }

    /// Functions at which this runtime's threads start: a user stack ending in one was walked
    /// completely.
    fn roots(&self) -> &'static [&'static str] {
        &[]
    }

    /// Between windows: caches shrink to their bounds.
    fn trim(&mut self) {}

    /// Drops what belongs to binaries (device, inode) and processes no longer live.
    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, _pids: &HashSet<u32>) {}

    /// Counters of the binaries read for names (Go's tables).
    fn tables(&self) -> TableStats {
        TableStats::default()
    }
}

/// What a process's executable says of itself (a Go binary's build info): the runtime and its
/// version, and the service it builds (its main module and that module's version), for the
/// process's tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExeIdentity {
    pub runtime: &'static str,
    pub runtime_version: String,
    pub service: Option<String>,
    pub service_version: Option<String>,
}

/// What a runtime's kernel side is, for the loader to size, switch and hand over without naming
/// any runtime.
pub(crate) struct KernelSide {
    /// The runtime (`--runtimes`).
    pub(crate) runtime: super::Runtime,
    /// Its per-process settings map, handed to its capture (`PY_PROCS`, ...).
    pub(crate) procs_map: &'static str,
    /// Its per-binary settings map, handed to its capture too, where its settings follow from the
    /// binary alone (`PY_FILES`): the kernel then writes a process's own entry as the process maps
    /// the binary (agent-ebpf `binaries.rs`).
    pub(crate) files_map: Option<&'static str>,
    /// Other maps only it uses, shrunk to one entry when it is off.
    pub(crate) other_maps: &'static [&'static str],
    /// The read-only global that turns its kernel code on (pruned by the verifier when 0).
    pub(crate) global: &'static str,
    /// Whether it steps frames in place among native ones, which needs the unwind tables' walk
    /// (off with `--unwind fp`).
    pub(crate) needs_tables: bool,
    /// Whether its kernel code reads the thread pointer from the task (the fs base on x86_64).
    pub(crate) needs_thread_pointer: bool,
    /// Whether the legacy object (Linux 5.10 to 6.0) holds its kernel code; where it does not, the
    /// runtime is off on those kernels.
    pub(crate) in_legacy: bool,
}

/// The first binary `process` maps whose fact `of` finds (a runtime's, read as the binary was first
/// opened), with that fact and the bias of the binary's mapping (run-time minus link-time
/// addresses).
pub(crate) fn mapped_fact<'a, T>(
    process: &'a ProcessInfo,
    of: impl Fn(&'a crate::process::Binary) -> Option<&'a T>,
) -> Option<(&'a crate::process::Binary, &'a T, u64)> {
    process.mappings.iter().find_map(|m| {
        let binary = m.binary.as_ref()?;
        let fact = of(binary)?;
        let bias = crate::process::load_bias::load_bias(
            m.module.start,
            m.module.file_offset,
            &binary.elf.segments,
        );
        Some((&**binary, fact, bias))
    })
}

/// What a capture found in a process captured again (new code mapped): `previous` when `same` says
/// it is the same instance, so what was read through it stays, else `found`; counted in `counts`
/// once per process image.
pub(crate) fn kept_instance<T>(
    found: Option<T>,
    previous: Option<&RuntimeInstance>,
    same: impl Fn(&T, &T) -> bool,
    counts: &mut super::ProcessCounts,
) -> Option<std::sync::Arc<T>>
where
    T: Send + Sync + 'static,
{
    let previous = previous.and_then(typed::<T>);
    if found.is_some() && previous.is_none() {
        counts.found += 1;
    }
    found.map(|found| match previous {
        Some(p) if same(&p, &found) => p,
        _ => std::sync::Arc::new(found),
    })
}

/// The instance of type `T` that `process` runs under `name`, if any.
pub(crate) fn instance_of<T: Send + Sync + 'static>(
    process: &ProcessInfo,
    name: &str,
) -> Option<std::sync::Arc<T>> {
    process.runtime(name).and_then(typed)
}

/// `instance` as the runtime's own type `T`, if it is one.
pub(crate) fn typed<T: Send + Sync + 'static>(
    instance: &RuntimeInstance,
) -> Option<std::sync::Arc<T>> {
    instance.clone().downcast::<T>().ok()
}
