//! CRuby's side of process capture: for each captured process mapping a binary that holds the VM
//! ([`super::elf`]), its version's layout ([`super::offsets`]) and where its threads keep their
//! execution context (`runtimes::tls`), handed to the kernel (`RB_PROCS`) for its Ruby frames to be
//! walked; a VM sonde cannot walk is counted and said once per binary.
//!
//! `libruby` is mapped before the dynamic linker has relocated it: a process found that early is
//! looked at again (`runtimes::retry`).

use std::{
    sync::{Arc, Mutex},
    time::Instant,
};

use sonde_abi::{
    proc_event,
    ruby::RbProc,
    tls::{TLS_SHARED, TlsPlace},
};

use super::{elf, interpreter::Ruby, offsets, vm::RubyVm};
use crate::{
    process::{ProcessInfo, RuntimeInstance, is_gone, warn_once},
    runtimes::{
        ProcessCounts, Runtime,
        appended::names::{AppendedNames, announced},
        memory::ProcessMemory,
        publish::Publisher,
        refusals::Refusals,
        retry::Retries,
        seam::{RingEvent, RuntimeCapture, kept_instance, mapped_fact},
        tls::{self, Libc, Unplaced},
    },
};

/// CRuby's capture state.
pub(crate) struct RubyCapture {
    /// Where found VMs are handed to the kernel, when it walks Ruby frames.
    publisher: Option<Publisher<RbProc>>,
    /// Where announced bodies are read into (the symbolizer's cache).
    names: Arc<Mutex<AppendedNames<Ruby>>>,
    /// Processes captured before their linker was done.
    retries: Retries,
    /// VMs it cannot walk.
    refusals: Refusals,
    /// Whether a process's memory was refused and warned about: once, then debug.
    memory_warned: bool,
}

impl RubyCapture {
    pub(crate) fn new(
        publisher: Option<Publisher<RbProc>>,
        names: Arc<Mutex<AppendedNames<Ruby>>>,
    ) -> Self {
        Self {
            publisher,
            names,
            retries: Retries::default(),
            refusals: Refusals::default(),
            memory_warned: false,
        }
    }

    /// The VM of `process`, if it maps one sonde can walk.
    fn find(&mut self, process: &ProcessInfo, counts: &mut ProcessCounts) -> Option<RubyVm> {
        let pid = process.pid;
        let (binary, rb, bias) = mapped_fact(process, elf::of)?;
        let refused = |this: &mut Self, counts: &mut ProcessCounts, why: String| {
            this.retries.done(pid);
            let message = format!(
                "process {pid} ({}): the Ruby VM of {} is not walked, its frames stay native: {why}",
                process.name, binary.path
            );
            this.refusals.refuse(pid, &binary.path, counts, &message);
        };
        let Some(version) = rb.version else {
            refused(self, counts, "its `ruby_version` cannot be read".into());
            return None;
        };
        let Some(layout) = offsets::layout(version) else {
            let (major, minor, patch) = version;
            refused(
                self,
                counts,
                format!(
                    "Ruby {major}.{minor}.{patch} is not one sonde knows ({})",
                    offsets::SUPPORTED
                ),
            );
            return None;
        };
        // Each thread's context is found from its TLS base (in 2.7, checked against it), which the
        // kernel side reads from the task where the architecture says how (`platform::arch`).
        if crate::platform::arch::THREAD_POINTER_IN_TASK.is_none() {
            refused(
                self,
                counts,
                "the kernel side does not read a thread's TLS base on this architecture yet".into(),
            );
            return None;
        }
        let libc = Libc::of(process.mappings.iter().map(|m| m.module.path.as_str()));
        let memory = ProcessMemory::new(pid);
        let place = match (layout.shared_context, &rb.ec, rb.shared_ec) {
            (true, _, Some(at)) => Ok(TlsPlace {
                mode: TLS_SHARED,
                offset: at.wrapping_add(bias) as i64,
                ..Default::default()
            }),
            (false, Some(ec), _) => tls::place(ec, bias, libc, &|at| memory.u64(at)),
            (shared, ..) => {
                let name = match shared {
                    true => "`ruby_current_execution_context_ptr`",
                    false => "`ruby_current_ec` (a build without thread-local storage)",
                };
                refused(self, counts, format!("it defines no {name}"));
                return None;
            }
        };
        let place = match place {
            Ok(place) => place,
            Err(Unplaced::NotReady) => {
                self.retries
                    .not_ready(pid, counts, "its Ruby VM's relocation");
                return None;
            }
            Err(Unplaced::Unsupported(why)) => {
                refused(self, counts, why);
                return None;
            }
            Err(Unplaced::Unreadable(why)) => {
                self.retries.done(pid);
                if !is_gone(pid) {
                    warn_once(
                        &mut self.memory_warned,
                        &format!(
                            "process {pid} ({}): {why}; its Ruby frames stay native",
                            process.name
                        ),
                    );
                }
                return None;
            }
        };
        self.retries.done(pid);
        tracing::debug!(pid, binary = %binary.path, ?version, ?libc, mode = place.mode, module = place.module, offset = place.offset, "Ruby VM found");
        let object_class = rb.object_class.map_or(0, |at| at.wrapping_add(bias));
        Some(RubyVm::new(
            binary.path.clone(),
            layout,
            layout.kernel_settings(place),
            object_class,
        ))
    }
}

impl RuntimeCapture for RubyCapture {
    fn runtime(&self) -> Runtime {
        Runtime::Ruby
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        // Captured again after new code was mapped: the same VM, and the bodies read through it.
        let same = |p: &RubyVm, f: &RubyVm| p.binary == f.binary && p.settings == f.settings;
        let found = kept_instance(self.find(process, counts), previous, same, counts);
        if let Some(publisher) = &mut self.publisher {
            publisher.captured(process.pid, found.as_ref().map(|vm| vm.settings));
        }
        found.map(|vm| vm as RuntimeInstance)
    }

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

    /// Processes captured before their `libruby` was relocated, whose delay is over.
    fn due(&mut self, now: Instant) -> Vec<u32> {
        self.retries.due(now)
    }

    fn announced(&mut self, pid: u32, instance: &RuntimeInstance, event: &RingEvent) -> bool {
        announced(
            &self.names,
            proc_event::RUBY_ISEQ,
            pid,
            instance,
            &event.head,
        )
    }
}
