//! The runtime seam: what every language runtime does as processes come and go, one trait each
//! `runtimes/<lang>/` implements and `registry.rs` lists. The capture layer (`crate::capture`) calls
//! it for every process; nothing outside `runtimes/` knows which runtimes there are.
//!
//! A runtime found in a process is kept in the process's [`ProcessInfo`] as an opaque instance
//! (the data model below knows no runtime), under the runtime's name; the runtime's own code reads
//! it back by type (`python::interpreter_of`, `hotspot::jvm_of`, `v8::node_of`).

use std::{collections::HashSet, sync::Arc, time::Instant};

use sonde_abi::{ProcEvent, runtime_frame::RuntimeFrame};

use super::{FrameTally, Outcome, ProcessCounts, Runtime, TableStats};
use crate::{
    process::{Binary, ProcessInfo, RuntimeInstance},
    profile::{Frame, Symbol},
};

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
    fn announced(&mut self, _pid: u32, _instance: &RuntimeInstance, _event: &ProcEvent) -> bool {
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

    /// Between windows: caches shrink to their bounds.
    fn trim(&mut self) {}

    /// Drops what belongs to binaries (device, inode) and processes no longer live.
    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, _pids: &HashSet<u32>) {}

    /// Counters of the binaries read for names (Go's tables).
    fn tables(&self) -> TableStats {
        TableStats::default()
    }
}

/// What a runtime's kernel side is, for the loader to size, switch and hand over without naming
/// any runtime.
pub(crate) struct KernelSide {
    /// The runtime (`--runtimes`).
    pub(crate) runtime: super::Runtime,
    /// Its per-process settings map, handed to its capture (`PY_PROCS`, ...).
    pub(crate) procs_map: &'static str,
    /// Other maps only it uses, shrunk to one entry when it is off.
    pub(crate) other_maps: &'static [&'static str],
    /// The read-only global that turns its kernel code on (pruned by the verifier when 0).
    pub(crate) global: &'static str,
    /// Whether it steps frames in place among native ones, which needs the unwind tables' walk
    /// (off with `--unwind fp`).
    pub(crate) needs_tables: bool,
    /// Whether its kernel code reads the thread pointer from the task (the fs base on x86_64).
    pub(crate) needs_thread_pointer: bool,
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
