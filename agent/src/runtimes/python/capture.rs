//! CPython's side of process capture: the interpreter of each captured process (`detect`), handed to
//! the kernel (`PY_PROCS`) for its Python frames to be walked, counted and said once per binary when
//! it cannot be walked; the code objects the kernel announces read while they live. Each interpreter
//! binary found is handed over too (`PY_FILES`): the next processes that map it are walked from their
//! first sample.

use std::sync::{Arc, Mutex};

use sonde_abi::{
    ProcEvent, proc_event,
    python::{CodeEvent, FILE_COPY, NAME_COPY, PyProc},
};

use super::{PythonNames, code::Remains, detect::Interpreter};
use crate::{
    process::{ProcessInfo, RuntimeInstance, is_gone, warn_once},
    runtimes::{
        ProcessCounts, Runtime,
        publish::{FilePublisher, Publisher},
        refusals::Refusals,
        seam::{RingEvent, RuntimeCapture, kept_instance, typed},
    },
};

/// CPython's capture state.
pub(crate) struct PythonCapture {
    /// Where found interpreters are handed to the kernel, when it walks Python frames.
    publisher: Option<Publisher<PyProc>>,
    /// Where found interpreters' binaries are handed to the kernel, likewise.
    files: Option<FilePublisher<PyProc>>,
    /// Where announced code objects are read into (the symbolizer's cache).
    names: Arc<Mutex<PythonNames>>,
    /// Interpreters it cannot walk.
    refusals: Refusals,
    /// Whether an interpreter's memory was refused and warned about: once, then debug.
    memory_warned: bool,
}

impl PythonCapture {
    pub(crate) fn new(
        publisher: Option<Publisher<PyProc>>,
        files: Option<FilePublisher<PyProc>>,
        names: Arc<Mutex<PythonNames>>,
    ) -> Self {
        Self {
            publisher,
            files,
            names,
            refusals: Refusals::default(),
            memory_warned: false,
        }
    }

    /// The CPython interpreter of `process`, if it runs one sonde can walk; one it cannot is counted
    /// and warned about once per binary.
    fn detect(&mut self, process: &ProcessInfo, counts: &mut ProcessCounts) -> Option<Interpreter> {
        let (pid, name) = (process.pid, &process.name);
        match super::detect::detect(pid, &process.mappings) {
            Ok(found) => {
                if let Some(interpreter) = &found {
                    tracing::debug!(pid, %name, binary = %interpreter.binary, version = ?interpreter.version, runtime = interpreter.runtime, "CPython found");
                }
                found
            }
            Err(err) => {
                match err.binary() {
                    Some(binary) => {
                        let message = format!("process {pid} ({name}): {err}");
                        self.refusals.refuse(pid, binary, counts, &message);
                    }
                    // The process exited while it was read.
                    None if is_gone(pid) => tracing::debug!(pid, %name, "{err}"),
                    // Its memory is refused: say once what to grant.
                    None => warn_once(
                        &mut self.memory_warned,
                        &format!("process {pid} ({name}): {err}; its Python frames stay unnamed"),
                    ),
                }
                None
            }
        }
    }
}

/// The interpreter `process` runs, if Python capture found one.
pub(crate) fn interpreter_of(process: &ProcessInfo) -> Option<Arc<Interpreter>> {
    crate::runtimes::seam::instance_of(process, super::NAME)
}

impl RuntimeCapture for PythonCapture {
    fn runtime(&self) -> Runtime {
        Runtime::Python
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        // Captured again after new code was mapped: the same interpreter, and the code objects read
        // through it (announced once, and gone with the process if it exits).
        let same = |p: &Interpreter, f: &Interpreter| p.same_image(f);
        let found = kept_instance(self.detect(process, counts), previous, same, counts);
        if let Some(publisher) = &mut self.publisher {
            publisher.captured(process.pid, found.as_ref().map(|i| i.kernel_settings()));
        }
        if let (Some(files), Some((file, settings))) = (
            &mut self.files,
            found.as_ref().and_then(|i| i.kernel_file_settings()),
        ) {
            files.publish(file, settings);
        }
        found.map(|i| i as RuntimeInstance)
    }

    fn exited(&mut self, pid: u32) {
        if let Some(publisher) = &mut self.publisher {
            publisher.exited(pid);
        }
    }

    fn evicted(&mut self, pid: u32) {
        self.refusals.evicted(pid);
    }

    fn announced(&mut self, pid: u32, instance: &RuntimeInstance, ring: &RingEvent) -> bool {
        let (event, copied) = (&ring.head, &ring.copied);
        if event.kind != proc_event::PYTHON_CODE {
            return false;
        }
        if let Some(interpreter) = typed::<Interpreter>(instance) {
            // The record's layout is `CodeEvent`'s; a shorter one (none) leaves the strings to be
            // read from the process. Without both strings' addresses (a field the walk could not
            // read), the object is read as it is now, unchecked.
            let copy = |at: usize, len: usize| {
                let at = at - std::mem::size_of::<ProcEvent>();
                copied.get(at..at + len).unwrap_or_default()
            };
            let remains = (event.data != 0 && event.extra != 0).then(|| Remains {
                name: event.data,
                file: event.extra,
                name_copy: copy(std::mem::offset_of!(CodeEvent, name), NAME_COPY),
                file_copy: copy(std::mem::offset_of!(CodeEvent, file), FILE_COPY),
            });
            let mut names = self.names.lock().expect("python names lock");
            names.read_code(pid, &interpreter, event.address, remains);
        }
        true
    }
}
