//! Go as one registration (`super::super::seam::Registration`): what the registry lists.

use std::sync::Arc;

use sonde_abi::names::{self, globals};

use super::{capture::GoCapture, elf, figures, identify, naming::GoNaming, unwind_rows};
use crate::runtimes::{
    Runtime,
    publish::Publisher,
    seam::{KernelSide, Registration, RuntimeCapture},
};

/// Go.
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::Go,
    // Copies the sampled goroutine's labels (agent-ebpf `go_labels.rs`); its frames are native.
    kernel: KernelSide {
        runtime: Runtime::Go,
        procs_map: names::GO_PROCS,
        files_map: None,
        other_maps: &[names::SAMPLE_LABELS],
        global: globals::GO,
        needs_tables: false,
        needs_thread_pointer: true,
        in_legacy: true,
    },
    elf: elf::READER,
    figures: figures::FIGURES,
    families: figures::FAMILIES,
    fuzz: &[],
    unwind: Some(unwind_rows::rows),
    unwind_as: None,
    identify: Some(identify),
    resource: None,
    cache: || Arc::new(()),
    namer: |_| Box::<GoNaming>::default(),
    capture: |maps, _| {
        let publisher = Publisher::new(maps.take(Runtime::Go)?, names::GO_PROCS, "Go");
        Some(Box::new(GoCapture::new(publisher)) as Box<dyn RuntimeCapture>)
    },
    #[cfg(test)]
    capture_without_kernel: None,
};
