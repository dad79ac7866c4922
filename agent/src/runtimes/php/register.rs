//! PHP as one registration (`super::super::seam::Registration`): what the registry lists.

use std::sync::{Arc, Mutex};

use sonde_abi::names::{self, globals};

use super::{capture::PhpCapture, elf, figures, interpreter::Php};
use crate::runtimes::{
    Runtime,
    appended::{names::AppendedNames, naming::AppendedNaming},
    publish::Publisher,
    seam::{KernelSide, Registration, RuntimeCapture, cache_of},
};

/// PHP.
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::Php,
    // Walks its frames after the native ones (agent-ebpf `unwind/php.rs`).
    kernel: KernelSide {
        runtime: Runtime::Php,
        procs_map: names::PHP_PROCS,
        files_map: None,
        other_maps: &[],
        global: globals::PHP,
        needs_tables: false,
        needs_thread_pointer: false,
        in_legacy: false,
    },
    elf: elf::READER,
    figures: figures::FIGURES,
    families: figures::FAMILIES,
    fuzz: &[],
    unwind: None,
    unwind_as: Some(super::jit::unwind_as),
    identify: None,
    resource: None,
    cache: || Arc::new(Mutex::new(AppendedNames::<Php>::default())),
    namer: |cache| Box::new(AppendedNaming::<Php>::new(cache_of(cache))),
    capture: |maps, cache| {
        let publisher = Publisher::new(maps.take(Runtime::Php)?, names::PHP_PROCS, "PHP");
        Some(Box::new(PhpCapture::new(Some(publisher), cache_of(cache))) as Box<dyn RuntimeCapture>)
    },
    #[cfg(test)]
    capture_without_kernel: Some(|cache| Box::new(PhpCapture::new(None, cache_of(cache)))),
};
