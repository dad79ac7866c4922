//! CPython as one registration (`super::super::seam::Registration`): what the registry lists.

use std::sync::{Arc, Mutex};

use sonde_abi::names::{self, globals};

use super::{PythonNames, capture::PythonCapture, elf, figures, linetable, naming::PythonNaming};
use crate::runtimes::{
    Runtime,
    publish::{FilePublisher, Publisher},
    seam::{KernelSide, Registration, RuntimeCapture, cache_of},
};

/// CPython.
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::Python,
    // Walks its frames after the native ones (agent-ebpf `unwind/python.rs`).
    kernel: KernelSide {
        runtime: Runtime::Python,
        procs_map: names::PY_PROCS,
        files_map: Some(names::PY_FILES),
        other_maps: &[names::PY_THREADS],
        global: globals::PYTHON,
        needs_tables: false,
        needs_thread_pointer: true,
        in_legacy: true,
    },
    elf: elf::READER,
    figures: figures::FIGURES,
    families: figures::FAMILIES,
    fuzz: &[("python_linetable", linetable::fuzz)],
    unwind: None,
    unwind_as: None,
    identify: None,
    resource: None,
    cache: || Arc::new(Mutex::new(PythonNames::default())),
    namer: |cache| Box::new(PythonNaming::new(cache_of(cache))),
    capture: |maps, cache| {
        let publisher = Publisher::new(maps.take(Runtime::Python)?, names::PY_PROCS, "Python");
        let files = maps.take_files(Runtime::Python).map(FilePublisher::new);
        Some(
            Box::new(PythonCapture::new(Some(publisher), files, cache_of(cache)))
                as Box<dyn RuntimeCapture>,
        )
    },
    #[cfg(test)]
    capture_without_kernel: Some(|cache| Box::new(PythonCapture::new(None, None, cache_of(cache)))),
};
