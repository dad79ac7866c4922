//! HotSpot's side of process capture: looking for a JVM in each capture (`detect`), handing what was
//! found to the kernel (`HS_PROCS`), counting and saying once per binary what cannot be walked,
//! looking again at JVMs that were captured before their code cache existed, and reading the methods
//! and code the kernel announces while they live.
//!
//! A JVM is usually first sampled while it starts: its first sample is what makes sonde capture it,
//! and the code heaps come a few tens of milliseconds later. Such a process is looked at again
//! (`runtimes::retry`) until its heaps are there; each look reads the JVM's VMStructs again (a few
//! milliseconds).

use std::{sync::Arc, time::Instant};

use std::sync::Mutex;

use sonde_abi::{hotspot::HsProc, names::runtime_programs};

use super::{HotspotError, JavaNames, Jvm, detect::detect};
use crate::{
    process::{ProcessInfo, RuntimeInstance, is_gone, warn_once},
    runtimes::{
        ProcessCounts, Runtime,
        publish::Publisher,
        refusals::Refusals,
        retry::Retries,
        seam::{RingEvent, RuntimeCapture, typed},
    },
};

/// HotSpot's capture state.
pub(crate) struct JavaCapture {
    /// Where found JVMs are handed to the kernel (`HS_PROCS`), when it walks Java frames.
    publisher: Option<Publisher<HsProc>>,
    /// Where announced methods and code are read into (the symbolizer's cache).
    names: Arc<Mutex<JavaNames>>,
    /// JVMs it cannot walk (`java_unsupported`).
    refusals: Refusals,
    /// Whether a JVM's memory was refused and warned about: once, then debug.
    memory_warned: bool,
    /// JVMs captured before their code cache existed.
    retries: Retries,
}

impl JavaCapture {
    pub(crate) fn new(publisher: Option<Publisher<HsProc>>, names: Arc<Mutex<JavaNames>>) -> Self {
        Self {
            publisher,
            names,
            refusals: Refusals::default(),
            memory_warned: false,
            retries: Retries::default(),
        }
    }

    /// The JVM of `pid` (named `name`), if it runs one sonde can walk; one it cannot is counted and
    /// warned about once per binary; one that is starting is retried later.
    fn detect(
        &mut self,
        pid: u32,
        name: &str,
        mappings: &[crate::process::Mapping],
        previous: Option<&Arc<Jvm>>,
        counts: &mut ProcessCounts,
    ) -> Option<Arc<Jvm>> {
        // Captured again after new code was mapped: the same JVM, and the names read through it.
        if let Some(previous) = previous.filter(|jvm| jvm.same_image(mappings)) {
            return Some(previous.clone());
        }
        let err = match detect(pid, mappings) {
            Ok(found) => {
                self.retries.done(pid);
                if let Some(jvm) = &found {
                    tracing::debug!(pid, %name, binary = %jvm.binary, version = %jvm.version, heaps = jvm.heaps().len(), "HotSpot found");
                }
                return found.map(Arc::new);
            }
            Err(err) => err,
        };
        match &err {
            HotspotError::NotReady { .. } => {
                self.retries.not_ready(pid, counts, "its JVM's code heaps")
            }
            HotspotError::Unsupported { binary, .. } => {
                self.retries.done(pid);
                let message = format!("process {pid} ({name}): {err}");
                self.refusals.refuse(pid, binary, counts, &message);
            }
            HotspotError::Unreadable { .. } => {
                self.retries.done(pid);
                match is_gone(pid) {
                    // The process exited while it was read.
                    true => tracing::debug!(pid, %name, "{err}"),
                    // Its memory is refused: say once what to grant.
                    false => warn_once(
                        &mut self.memory_warned,
                        &format!("process {pid} ({name}): {err}; its Java frames stay [jit]"),
                    ),
                }
            }
        }
        None
    }
}

/// The JVM `process` runs, if Java capture found one.
pub(crate) fn jvm_of(process: &ProcessInfo) -> Option<Arc<Jvm>> {
    crate::runtimes::seam::instance_of(process, super::NAME)
}

impl RuntimeCapture for JavaCapture {
    fn runtime(&self) -> Runtime {
        Runtime::Java
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        let previous = previous.and_then(typed::<Jvm>);
        let jvm = self.detect(
            process.pid,
            &process.name,
            &process.mappings,
            previous.as_ref(),
            counts,
        );
        // Counted once per process image.
        if jvm.is_some() && previous.is_none() {
            counts.found += 1;
        }
        if let Some(publisher) = &mut self.publisher {
            publisher.captured(process.pid, jvm.as_deref().map(Jvm::kernel_settings));
        }
        jvm.map(|j| j as RuntimeInstance)
    }

    /// Nothing of `pid` may outlive it (nor is it looked at again).
    fn exited(&mut self, pid: u32) {
        self.retries.done(pid);
        if let Some(publisher) = &mut self.publisher {
            publisher.exited(pid);
        }
    }

    fn evicted(&mut self, pid: u32) {
        self.refusals.evicted(pid);
        self.retries.done(pid);
    }

    /// JVMs that had no code cache when captured (they were starting), whose delay is over.
    fn due(&mut self, now: Instant) -> Vec<u32> {
        self.retries.due(now)
    }

    fn program_needed(&self) -> Option<u32> {
        let published = self.publisher.as_ref().is_some_and(Publisher::holds_any);
        published.then_some(runtime_programs::JAVA)
    }

    fn announced(&mut self, pid: u32, instance: &RuntimeInstance, event: &RingEvent) -> bool {
        let unpack = sonde_abi::hotspot::unpack_frame;
        JavaNames::announced(&self.names, pid, instance, &event.head, unpack)
    }
}
