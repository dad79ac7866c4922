//! The thread context's side of process capture: for each captured process mapping a binary that
//! defines `otel_thread_ctx_v1`, where its threads keep it (`runtimes::tls`) and the names of its
//! attribute keys ([`super::process_ctx`]), handed to the kernel (`TC_PROCS`).
//!
//! A library is captured as it is mapped, before the dynamic linker has relocated it, and a tracer
//! publishes its process context as it starts: a process found too early is looked at again
//! (`runtimes::retry`).

use std::{sync::Arc, time::Instant};

use sonde_abi::{
    labels::KEY_BYTES,
    thread_ctx::{MAX_KEYS, ThreadCtxProc},
};

use super::{
    elf,
    process_ctx::{self, Unread},
};
use crate::{
    process::{ProcessInfo, RuntimeInstance, is_gone, warn_once},
    runtimes::{
        ProcessCounts, Runtime,
        memory::ProcessMemory,
        publish::Publisher,
        refusals::Refusals,
        retry::Retries,
        seam::{RuntimeCapture, mapped_fact},
        tls::{self, Libc, Unplaced},
    },
};

/// A process publishing thread contexts: what the kernel was given.
#[derive(Debug)]
pub(crate) struct ThreadContext {
    pub(crate) settings: ThreadCtxProc,
}

/// The thread context's capture state.
pub(crate) struct TraceContextCapture {
    publisher: Publisher<ThreadCtxProc>,
    /// Processes captured before their linker or tracer was done.
    retries: Retries,
    /// Binaries whose thread context cannot be read.
    refusals: Refusals,
    /// Whether a process's memory was refused and warned about: once, then debug.
    memory_warned: bool,
}

impl TraceContextCapture {
    pub(crate) fn new(publisher: Publisher<ThreadCtxProc>) -> Self {
        Self {
            publisher,
            retries: Retries::default(),
            refusals: Refusals::default(),
            memory_warned: false,
        }
    }

    /// The thread context of `process`, if a binary it maps defines one and it could be placed.
    fn find(&mut self, process: &ProcessInfo, counts: &mut ProcessCounts) -> Option<ThreadContext> {
        let pid = process.pid;
        let (binary, var, bias) = mapped_fact(process, elf::of)?;
        let libc = Libc::of(process.mappings.iter().map(|m| m.module.path.as_str()));
        let memory = ProcessMemory::new(pid);
        let mut settings = match tls::place(var, bias, libc, &|at| memory.u64(at)) {
            Ok(place) => ThreadCtxProc {
                place,
                ..Default::default()
            },
            Err(Unplaced::NotReady) => {
                self.retries
                    .not_ready(pid, counts, "its thread context's relocation");
                return None;
            }
            Err(Unplaced::Unsupported(why)) => {
                self.retries.done(pid);
                let message = format!(
                    "process {pid} ({}): the thread context of {} cannot be read: {why}",
                    process.name, binary.path
                );
                self.refusals.refuse(pid, &binary.path, counts, &message);
                return None;
            }
            Err(Unplaced::Unreadable(why)) => {
                self.retries.done(pid);
                if !is_gone(pid) {
                    warn_once(
                        &mut self.memory_warned,
                        &format!(
                            "process {pid} ({}): {why}; its samples go without their spans",
                            process.name
                        ),
                    );
                }
                return None;
            }
        };
        let published = match process_ctx::read(pid) {
            Ok(published) => {
                self.retries.done(pid);
                Some(published)
            }
            // A tracer publishes its process context as it starts, maybe after its library was
            // relocated: the spans are read meanwhile, their attributes once it is there.
            Err(Unread::Absent | Unread::Updating) => {
                self.retries
                    .not_ready(pid, counts, "its tracer's process context");
                None
            }
            Err(Unread::Bad(why)) => {
                self.retries.done(pid);
                tracing::debug!(pid, "process context not read: {why}");
                None
            }
        };
        if let Some(published) = &published {
            name_keys(&mut settings, &published.keys);
        }
        tracing::debug!(pid, binary = %binary.path, ?libc, mode = settings.place.mode, module = settings.place.module, offset = settings.place.offset, keys = settings.key_count, "thread context found");
        Some(ThreadContext { settings })
    }
}

/// Names the first `MAX_KEYS` attribute keys of `settings`, each cut to `KEY_BYTES`.
fn name_keys(settings: &mut ThreadCtxProc, keys: &[String]) {
    let count = keys.len().min(MAX_KEYS);
    for (i, key) in keys.iter().take(count).enumerate() {
        let bytes = &key.as_bytes()[..key.len().min(KEY_BYTES)];
        settings.keys[i] = [0; KEY_BYTES];
        settings.keys[i][..bytes.len()].copy_from_slice(bytes);
        settings.key_lens[i] = bytes.len() as u8;
    }
    settings.key_count = count as u32;
}

impl RuntimeCapture for TraceContextCapture {
    fn runtime(&self) -> Runtime {
        Runtime::TraceContext
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        let found = self.find(process, counts);
        if found.is_some() && previous.is_none() {
            counts.found += 1;
        }
        self.publisher
            .captured(process.pid, found.as_ref().map(|f| f.settings));
        found.map(|f| Arc::new(f) as RuntimeInstance)
    }

    fn exited(&mut self, pid: u32) {
        self.retries.done(pid);
        self.publisher.exited(pid);
    }

    fn evicted(&mut self, pid: u32) {
        self.refusals.evicted(pid);
        self.retries.done(pid);
    }

    /// Processes captured before their library was relocated or their tracer had published its
    /// context, whose delay is over.
    fn due(&mut self, now: Instant) -> Vec<u32> {
        self.retries.due(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_named_in_order_cut_to_fit() {
        let mut settings = ThreadCtxProc::default();
        let long = "k".repeat(KEY_BYTES + 5);
        let mut keys = vec!["datadog.local_root_span_id".to_owned(), long];
        keys.extend((0..MAX_KEYS).map(|i| format!("extra.{i}")));
        name_keys(&mut settings, &keys);
        assert_eq!(settings.key_count as usize, MAX_KEYS);
        assert_eq!(settings.key_lens[0], 26);
        assert_eq!(&settings.keys[0][..26], b"datadog.local_root_span_id");
        assert_eq!(settings.key_lens[1] as usize, KEY_BYTES);
    }
}
