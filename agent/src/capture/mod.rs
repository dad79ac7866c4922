//! What happens when a process appears, changes or goes: the process table (`crate::process`) is read,
//! every registered runtime (`crate::runtimes::registry`) looks for itself in the capture and keeps
//! the kernel's settings in step, and the event thread (`events.rs`) drives it from the kernel's
//! process events, telling the unwinder and loading a runtime's kernel program on first need. Above
//! `process`, `runtimes`, `bpf` and `unwind`, which it ties together.

pub(crate) mod events;

use std::{collections::HashMap, sync::Arc, time::Instant};

use crate::{
    process::{CaptureStats, ProcessInfo, ProcessTable},
    runtimes::{
        RuntimeStats, registry,
        seam::{RingEvent, RuntimeCapture},
    },
};

/// The process table with the runtimes that look at every capture.
pub(crate) struct Capturer {
    table: ProcessTable,
    runtimes: Vec<Box<dyn RuntimeCapture>>,
    /// What each runtime found (`processes` only).
    found: RuntimeStats,
}

impl Capturer {
    /// A table whose captures `runtimes` look at.
    pub(crate) fn new(runtimes: Vec<Box<dyn RuntimeCapture>>) -> Self {
        Self {
            table: ProcessTable::with_readers(&registry::ELF_READERS),
            runtimes,
            found: RuntimeStats::default(),
        }
    }

    /// Captures `pid` now (again after an exec, or when new code was mapped). None when the process
    /// is gone or refused.
    pub(crate) fn capture(&mut self, pid: u32) -> Option<Arc<ProcessInfo>> {
        let mut info = self.table.read(pid)?;
        let previous = self.table.get(pid);
        for runtime in &mut self.runtimes {
            let name = runtime.name();
            let before = previous.as_deref().and_then(|p| p.runtime(name));
            let counts = &mut self.found.of_mut(runtime.runtime()).processes;
            if let Some(found) = runtime.captured(&info, before, counts) {
                info.runtimes.push((name, found));
            }
        }
        Some(self.table.insert(info))
    }

    /// Captures `pid` unless it is already known (or its mappings were refused already).
    pub(crate) fn ensure(&mut self, pid: u32) -> Option<Arc<ProcessInfo>> {
        if self.table.unknown(pid) {
            self.capture(pid);
        }
        self.table.get(pid)
    }

    /// Each of `pids` (the processes of a window's samples), captured now if not known yet and
    /// still alive; None for a process gone before it was captured.
    pub(crate) fn ensure_all(
        &mut self,
        pids: impl IntoIterator<Item = u32>,
    ) -> HashMap<u32, Option<Arc<ProcessInfo>>> {
        pids.into_iter()
            .map(|pid| (pid, self.ensure(pid)))
            .collect()
    }

    /// Records that `pid` exited; its data stays until [`Capturer::evict_exited_before`].
    pub(crate) fn mark_exited(&mut self, pid: u32, at: Instant) {
        self.table.mark_exited(pid, at);
        for runtime in &mut self.runtimes {
            runtime.exited(pid);
        }
    }

    /// Forgets processes that exited before `cutoff` (their last samples are already drained).
    pub(crate) fn evict_exited_before(&mut self, cutoff: Instant) -> Vec<u32> {
        let gone = self.table.evict_exited_before(cutoff);
        for pid in &gone {
            for runtime in &mut self.runtimes {
                runtime.evicted(*pid);
            }
        }
        gone
    }

    /// Looks again at the processes a runtime waits for (a JVM that had no code cache yet), those
    /// whose delay is over: cheap when none is waited for. Call often (the event thread does, every
    /// 50 ms). Returns the processes a runtime was found in: how their code unwinds may have changed
    /// with it (`seam::UnwindAs`).
    pub(crate) fn retry(&mut self) -> Vec<Arc<ProcessInfo>> {
        let now = Instant::now();
        let mut found_in = Vec::new();
        for runtime in &mut self.runtimes {
            for pid in runtime.due(now) {
                let Some(info) = self.table.get(pid).filter(|p| p.exited_at.is_none()) else {
                    runtime.evicted(pid);
                    continue;
                };
                let counts = &mut self.found.of_mut(runtime.runtime()).processes;
                if let Some(found) = runtime.captured(&info, None, counts) {
                    self.table.set_runtime(pid, runtime.name(), found);
                    found_in.extend(self.table.get(pid));
                }
            }
        }
        found_in
    }

    /// The runtimes' kernel programs that published processes need
    /// (`sonde_abi::names::runtime_programs` indexes).
    pub(crate) fn programs_needed(&self) -> Vec<u32> {
        self.runtimes
            .iter()
            .filter_map(|r| r.program_needed())
            .collect()
    }

    /// Hands `event` (a code object, a runtime frame) to the runtime of its process that reads it;
    /// false when its process is not captured (yet).
    pub(crate) fn announced(&mut self, event: &RingEvent) -> bool {
        let Some(info) = self.table.get(event.head.tgid) else {
            return false;
        };
        for (name, instance) in &info.runtimes {
            let runtime = self.runtimes.iter_mut().find(|r| r.name() == *name);
            if runtime.is_some_and(|r| r.announced(info.pid, instance, event)) {
                break;
            }
        }
        true
    }

    /// The process table.
    pub(crate) fn table(&self) -> &ProcessTable {
        &self.table
    }

    /// Forgets what `pid` ran before an exec (see [`ProcessTable::forget_image`]).
    pub(crate) fn forget_image(&mut self, pid: u32) {
        self.table.forget_image(pid);
    }

    /// Sets what each runtime found so far (`processes`) in `stats`.
    pub(crate) fn runtime_processes(&self, stats: &mut crate::runtimes::RuntimeStats) {
        for runtime in crate::runtimes::Runtime::ALL {
            stats.of_mut(runtime).processes = self.found.of(runtime).processes;
        }
    }

    /// What `runtime` found so far (tests).
    #[cfg(test)]
    pub(crate) fn found(
        &self,
        runtime: crate::runtimes::Runtime,
    ) -> crate::runtimes::ProcessCounts {
        self.found.of(runtime).processes
    }

    /// Capture counters so far.
    pub(crate) fn stats(&self) -> CaptureStats {
        self.table.stats
    }

    /// The captured process `pid`.
    #[cfg(test)]
    pub(crate) fn get(&self, pid: u32) -> Option<Arc<ProcessInfo>> {
        self.table.get(pid)
    }

    /// A table whose captures `runtime` looks at, handing nothing to the kernel (tests).
    #[cfg(test)]
    pub(crate) fn with(runtime: crate::runtimes::Runtime) -> Self {
        let on = crate::runtimes::Runtimes::none().with(runtime, true);
        let caches = crate::runtimes::registry::RuntimeCaches::default();
        Self::new(crate::runtimes::registry::captures_without_kernel(
            on, &caches,
        ))
    }
}

impl Default for Capturer {
    /// A table no runtime looks at (native frames only).
    fn default() -> Self {
        Self::new(Vec::new())
    }
}
