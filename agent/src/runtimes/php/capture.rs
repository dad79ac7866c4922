//! PHP's side of process capture: for each captured process mapping a binary that holds the
//! executor ([`super::elf`]), its version's layout ([`super::offsets`]) and where its executor
//! globals are, handed to the kernel (`PHP_PROCS`) for its PHP frames to be walked; an executor sonde
//! cannot walk is counted and said once per binary.

use std::sync::{Arc, Mutex};

use sonde_abi::{php::PhpProc, proc_event};

use super::{elf, interpreter::Php, offsets, vm::PhpVm};
use crate::{
    process::{ProcessInfo, RuntimeInstance},
    runtimes::{
        ProcessCounts, Runtime,
        appended::names::{AppendedNames, announced},
        publish::Publisher,
        refusals::Refusals,
        seam::{RingEvent, RuntimeCapture, kept_instance, mapped_fact},
    },
};

/// PHP's capture state.
pub(crate) struct PhpCapture {
    /// Where found executors are handed to the kernel, when it walks PHP frames.
    publisher: Option<Publisher<PhpProc>>,
    /// Where announced functions are read into (the symbolizer's cache).
    names: Arc<Mutex<AppendedNames<Php>>>,
    /// Executors it cannot walk.
    refusals: Refusals,
}

impl PhpCapture {
    pub(crate) fn new(
        publisher: Option<Publisher<PhpProc>>,
        names: Arc<Mutex<AppendedNames<Php>>>,
    ) -> Self {
        Self {
            publisher,
            names,
            refusals: Refusals::default(),
        }
    }

    /// The executor of `process`, if it maps one sonde can walk.
    fn find(&mut self, process: &ProcessInfo, counts: &mut ProcessCounts) -> Option<PhpVm> {
        let pid = process.pid;
        let (binary, php, bias) = mapped_fact(process, elf::of)?;
        let mut refused = |why: String| {
            let message = format!(
                "process {pid} ({}): the PHP executor of {} is not walked, its frames stay native: {why}",
                process.name, binary.path
            );
            self.refusals.refuse(pid, &binary.path, counts, &message);
        };
        let Some(version) = php.version else {
            refused("its version string (`X-Powered-By: PHP/...`) cannot be found".into());
            return None;
        };
        let (major, minor, patch) = version;
        let Some(layout) = offsets::layout(version) else {
            refused(format!(
                "PHP {major}.{minor}.{patch} is not one sonde knows ({})",
                offsets::SUPPORTED
            ));
            return None;
        };
        let Some(executor_globals) = php.executor_globals else {
            refused(
                "it exports no `executor_globals` (a thread-safe build, which keeps them per thread)"
                    .into(),
            );
            return None;
        };
        tracing::debug!(pid, binary = %binary.path, ?version, "PHP executor found");
        Some(PhpVm {
            binary: binary.path.clone(),
            layout,
            settings: layout.kernel_settings(bias.wrapping_add(executor_globals)),
            loop_body: php.loop_body,
        })
    }
}

impl RuntimeCapture for PhpCapture {
    fn runtime(&self) -> Runtime {
        Runtime::Php
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        // Captured again after new code was mapped: the same executor, and the functions read
        // through it.
        let same = |p: &PhpVm, f: &PhpVm| p.binary == f.binary && p.settings == f.settings;
        let found = kept_instance(self.find(process, counts), previous, same, counts);
        if let Some(publisher) = &mut self.publisher {
            publisher.captured(process.pid, found.as_ref().map(|vm| vm.settings));
        }
        found.map(|vm| vm as RuntimeInstance)
    }

    fn exited(&mut self, pid: u32) {
        if let Some(publisher) = &mut self.publisher {
            publisher.exited(pid);
        }
    }

    fn evicted(&mut self, pid: u32) {
        self.refusals.evicted(pid);
    }

    fn announced(&mut self, pid: u32, instance: &RuntimeInstance, event: &RingEvent) -> bool {
        announced(
            &self.names,
            proc_event::PHP_FUNCTION,
            pid,
            instance,
            &event.head,
        )
    }
}
