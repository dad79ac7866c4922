//! HotSpot's side of process capture: looking for a JVM in each capture (`detect`), handing what was
//! found to the kernel (`HS_PROCS`), counting and saying once per binary what cannot be walked,
//! looking again at JVMs that were captured before their code cache existed, and reading the methods
//! and code the kernel announces while they live.
//!
//! A JVM is usually first sampled while it starts: its first sample is what makes sonde capture it,
//! and the code heaps come a few tens of milliseconds later. Such a process is kept in a bounded
//! retry list and looked at again with a growing delay ([`RETRY_FIRST`] doubling up to
//! [`RETRY_MAX`], at most [`MAX_ATTEMPTS`] times, [`MAX_RETRIES_PER_CALL`] processes per call) until
//! its heaps are there; each retry reads the JVM's VMStructs again (a few milliseconds).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use std::sync::Mutex;

use sonde_abi::{ProcEvent, hotspot::HsProc, names::runtime_programs};

use super::{HotspotError, JavaNames, Jvm, detect::detect};
use crate::{
    process::{ProcessInfo, RuntimeInstance, is_gone, warn_once},
    runtimes::{
        ProcessCounts, Runtime,
        publish::Publisher,
        seam::{RuntimeCapture, typed},
    },
};

/// First delay before a starting JVM is looked at again.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest delay between two looks.
const RETRY_MAX: Duration = Duration::from_secs(5);
/// Looks at one starting JVM (its capture included) before giving up (about two minutes with the
/// delays above).
const MAX_ATTEMPTS: u32 = 30;
/// Starting JVMs waited for at once; more are not retried (counted as abandoned).
const MAX_PENDING: usize = 1024;
/// Processes looked at again per call, so one call stays short while the table is locked.
const MAX_RETRIES_PER_CALL: usize = 8;

/// A JVM waiting for its code cache.
struct Pending {
    /// Looks that found no code cache.
    looks: u32,
    /// When to look again.
    next: Instant,
}

/// HotSpot's capture state.
pub(crate) struct JavaCapture {
    /// Where found JVMs are handed to the kernel (`HS_PROCS`), when it walks Java frames.
    publisher: Option<Publisher<HsProc>>,
    /// Where announced methods and code are read into (the symbolizer's cache).
    names: Arc<Mutex<JavaNames>>,
    /// Processes already counted in `java_unsupported` (until evicted).
    unsupported: HashSet<u32>,
    /// `libjvm.so` files whose refusal was warned about: once per binary, then debug.
    warned: HashSet<String>,
    /// Whether a JVM's memory was refused and warned about: once, then debug.
    memory_warned: bool,
    /// JVMs captured before their code cache existed, by pid.
    pending: HashMap<u32, Pending>,
}

impl JavaCapture {
    pub(crate) fn new(publisher: Option<Publisher<HsProc>>, names: Arc<Mutex<JavaNames>>) -> Self {
        Self {
            publisher,
            names,
            unsupported: HashSet::new(),
            warned: HashSet::new(),
            memory_warned: false,
            pending: HashMap::new(),
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
                self.pending.remove(&pid);
                if let Some(jvm) = &found {
                    tracing::debug!(pid, %name, binary = %jvm.binary, version = %jvm.version, heaps = jvm.heaps().len(), "HotSpot found");
                }
                return found.map(Arc::new);
            }
            Err(err) => err,
        };
        match &err {
            HotspotError::NotReady { .. } => self.not_ready(pid, counts),
            HotspotError::Unsupported { binary, .. } => {
                self.pending.remove(&pid);
                if self.unsupported.insert(pid) {
                    counts.unsupported += 1;
                }
                if self.warned.insert(binary.clone()) {
                    tracing::warn!(pid, %name, "{err}");
                } else {
                    tracing::debug!(pid, %name, "{err}");
                }
            }
            HotspotError::Unreadable { .. } => {
                self.pending.remove(&pid);
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

    /// `pid` has a JVM without code heaps yet: schedules (or reschedules) a look at it.
    fn not_ready(&mut self, pid: u32, counts: &mut ProcessCounts) {
        let now = Instant::now();
        if let Some(p) = self.pending.get_mut(&pid) {
            p.looks += 1;
            if p.looks >= MAX_ATTEMPTS {
                self.pending.remove(&pid);
                counts.abandoned += 1;
                tracing::debug!(
                    pid,
                    "the JVM of process {pid} set up no code heap in time: its Java frames stay [jit]"
                );
                return;
            }
            p.next = now + delay(p.looks - 1);
            return;
        }
        counts.not_ready += 1;
        if self.pending.len() >= MAX_PENDING {
            counts.abandoned += 1;
            return;
        }
        self.pending.insert(
            pid,
            Pending {
                looks: 1,
                next: now + RETRY_FIRST,
            },
        );
    }

    /// The processes due for another look at `now` (at most [`MAX_RETRIES_PER_CALL`]).
    fn due_at(&self, now: Instant) -> Vec<u32> {
        self.pending
            .iter()
            .filter(|(_, p)| p.next <= now)
            .map(|(pid, _)| *pid)
            .take(MAX_RETRIES_PER_CALL)
            .collect()
    }

    /// Whether a JVM is waited for.
    fn has_pending(&self) -> bool {
        !self.pending.is_empty()
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
        self.pending.remove(&pid);
        if let Some(publisher) = &mut self.publisher {
            publisher.exited(pid);
        }
    }

    fn evicted(&mut self, pid: u32) {
        self.unsupported.remove(&pid);
        self.pending.remove(&pid);
    }

    /// JVMs that had no code cache when captured (they were starting), whose delay is over.
    fn due(&mut self, now: Instant) -> Vec<u32> {
        match self.has_pending() {
            true => self.due_at(now),
            false => Vec::new(),
        }
    }

    fn program_needed(&self) -> Option<u32> {
        let published = self.publisher.as_ref().is_some_and(Publisher::holds_any);
        published.then_some(runtime_programs::JAVA)
    }

    fn announced(&mut self, pid: u32, instance: &RuntimeInstance, event: &ProcEvent) -> bool {
        let unpack = sonde_abi::hotspot::unpack_frame;
        JavaNames::announced(&self.names, pid, instance, event, unpack)
    }
}

/// The delay after the `retry`-th look again (from 1) found nothing.
fn delay(retry: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1 << retry.min(16))
        .min(RETRY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_jvms_are_looked_at_again_with_growing_delays_then_given_up() {
        assert_eq!(delay(1), Duration::from_millis(100));
        assert_eq!(delay(3), Duration::from_millis(400));
        assert_eq!(delay(20), RETRY_MAX);
        let total: Duration = (1..MAX_ATTEMPTS).map(delay).sum();
        assert!(
            (Duration::from_secs(60)..Duration::from_secs(180)).contains(&total),
            "{total:?}"
        );
        let mut java = JavaCapture::new(None, Default::default());
        let mut counts = ProcessCounts::default();
        java.not_ready(7, &mut counts);
        assert_eq!(counts.not_ready, 1);
        assert!(java.due_at(Instant::now()).is_empty(), "not yet");
        assert_eq!(java.due_at(Instant::now() + RETRY_FIRST), [7]);
        for _ in 1..MAX_ATTEMPTS {
            java.not_ready(7, &mut counts);
        }
        assert_eq!((counts.not_ready, counts.abandoned), (1, 1));
        assert!(!java.has_pending());
        // Bounded: beyond MAX_PENDING processes, the rest are abandoned at once.
        for pid in 0..MAX_PENDING as u32 + 3 {
            java.not_ready(100 + pid, &mut counts);
        }
        assert_eq!(java.pending.len(), MAX_PENDING);
        assert_eq!(counts.abandoned, 4);
        let far = Instant::now() + Duration::from_secs(1);
        assert_eq!(java.due_at(far).len(), MAX_RETRIES_PER_CALL);
        RuntimeCapture::exited(&mut java, 100);
        RuntimeCapture::evicted(&mut java, 101);
        assert_eq!(java.pending.len(), MAX_PENDING - 2);
    }
}
