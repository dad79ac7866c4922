//! Go's side of process capture: each captured Go process described to the kernel (`GO_PROCS`: its
//! root functions, and where its goroutine labels are), read once per binary. Go keeps no state per
//! process: its frames are named from the binary's `.gopclntab` (`GoNames`).

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
};

use sonde_abi::go::GoProc;

use crate::{
    process::{Binary, ProcessInfo, RuntimeInstance},
    runtimes::{ProcessCounts, Runtime, publish::Publisher, seam::RuntimeCapture},
};

/// Go's capture state.
pub(crate) struct GoCapture {
    /// Where Go processes are described to the kernel.
    publisher: Publisher<GoProc>,
    /// The settings of each Go binary seen (None: not readable), by identity, while it is mapped.
    settings: HashMap<(u64, u64), (Weak<Binary>, Option<GoProc>)>,
}

impl GoCapture {
    pub(crate) fn new(publisher: Publisher<GoProc>) -> Self {
        Self {
            publisher,
            settings: HashMap::new(),
        }
    }

    /// The kernel's settings for the Go executable `process` maps, read once per binary, with the
    /// process's load bias; a binary whose labels cannot be read is counted and said once (its roots
    /// are still published).
    fn settings(&mut self, process: &ProcessInfo, counts: &mut ProcessCounts) -> Option<GoProc> {
        let (module, binary) = process.mappings.iter().find_map(|m| {
            Some((
                &m.module,
                m.binary.as_ref().filter(|b| super::elf::is_go(b))?,
            ))
        })?;
        let pid = process.pid;
        let (_, settings) = self.settings.entry(binary.id).or_insert_with(|| {
            let settings = super::kernel_settings(binary).map(|(settings, labels)| {
                if let Err(why) = labels {
                    counts.unsupported += 1;
                    tracing::warn!(pid, binary = %binary.path, "goroutine labels not read: {why}");
                }
                settings
            });
            (Arc::downgrade(binary), settings)
        });
        let mut settings = (*settings)?;
        // A PIE Go binary runs where it was loaded; its root ranges are link-time addresses.
        settings.bias = module
            .start
            .wrapping_sub(binary.elf.vaddr_of(module.file_offset));
        Some(settings)
    }
}

impl RuntimeCapture for GoCapture {
    fn runtime(&self) -> Runtime {
        Runtime::Go
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        _previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        let settings = self.settings(process, counts);
        self.publisher.captured(process.pid, settings);
        None
    }

    fn exited(&mut self, pid: u32) {
        self.publisher.exited(pid);
    }

    fn evicted(&mut self, _pid: u32) {
        // A binary no process maps any more is forgotten with it.
        self.settings
            .retain(|_, (binary, _)| binary.strong_count() > 0);
    }
}
