//! OpenJDK's HotSpot as one registration (`super::super::seam::Registration`): what the registry lists.

use std::sync::{Arc, Mutex};

use sonde_abi::names::{self, globals};

use super::{JavaNames, capture::JavaCapture, elf, figures, naming::JavaNaming};
use crate::runtimes::{
    Runtime,
    publish::Publisher,
    seam::{KernelSide, Registration, RuntimeCapture, cache_of},
};

/// OpenJDK's HotSpot.
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::Java,
    // Steps Java frames in place (agent-ebpf `unwind/hotspot.rs`).
    kernel: KernelSide {
        runtime: Runtime::Java,
        procs_map: names::HS_PROCS,
        files_map: None,
        other_maps: &[],
        global: globals::JAVA,
        needs_tables: true,
        needs_thread_pointer: false,
        in_legacy: true,
    },
    elf: elf::READER,
    figures: figures::FIGURES,
    families: figures::FAMILIES,
    fuzz: &[],
    unwind: None,
    unwind_as: None,
    identify: None,
    resource: None,
    cache: || Arc::new(Mutex::new(JavaNames::default())),
    namer: |cache| Box::new(JavaNaming::new(cache_of(cache))),
    capture: |maps, cache| {
        let publisher = Publisher::new(maps.take(Runtime::Java)?, names::HS_PROCS, "Java");
        Some(Box::new(JavaCapture::new(Some(publisher), cache_of(cache))) as Box<dyn RuntimeCapture>)
    },
    #[cfg(test)]
    capture_without_kernel: Some(|cache| Box::new(JavaCapture::new(None, cache_of(cache)))),
};
