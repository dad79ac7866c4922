//! Node.js (V8) as one registration (`super::super::seam::Registration`): what the registry lists.

use std::sync::{Arc, Mutex};

use sonde_abi::names::{self, globals};

use super::{V8Names, capture::NodeCapture, elf, figures, naming::NodeNaming};
use crate::runtimes::{
    Runtime,
    publish::Publisher,
    seam::{KernelSide, Registration, RuntimeCapture, cache_of},
};

/// Node.js (V8).
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::Node,
    // Steps JavaScript frames in place (agent-ebpf `unwind/v8.rs`).
    kernel: KernelSide {
        runtime: Runtime::Node,
        procs_map: names::V8_PROCS,
        files_map: None,
        other_maps: &[],
        global: globals::V8,
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
    cache: || Arc::new(Mutex::new(V8Names::default())),
    namer: |cache| Box::new(NodeNaming::new(cache_of(cache))),
    capture: |maps, cache| {
        let publisher = Publisher::new(maps.take(Runtime::Node)?, names::V8_PROCS, "Node.js");
        Some(Box::new(NodeCapture::new(Some(publisher), cache_of(cache))) as Box<dyn RuntimeCapture>)
    },
    #[cfg(test)]
    capture_without_kernel: Some(|cache| Box::new(NodeCapture::new(None, cache_of(cache)))),
};
