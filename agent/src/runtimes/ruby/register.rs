//! CRuby as one registration (`super::super::seam::Registration`): what the registry lists.

use std::sync::{Arc, Mutex};

use sonde_abi::names::{self, globals};

use super::{capture::RubyCapture, elf, figures, interpreter::Ruby};
use crate::runtimes::{
    Runtime,
    appended::{names::AppendedNames, naming::AppendedNaming},
    publish::Publisher,
    seam::{KernelSide, Registration, RuntimeCapture, cache_of},
};

/// CRuby.
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::Ruby,
    // Walks its frames after the native ones (agent-ebpf `unwind/ruby.rs`).
    kernel: KernelSide {
        runtime: Runtime::Ruby,
        procs_map: names::RB_PROCS,
        files_map: None,
        other_maps: &[],
        global: globals::RUBY,
        needs_tables: false,
        needs_thread_pointer: true,
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
    cache: || Arc::new(Mutex::new(AppendedNames::<Ruby>::default())),
    namer: |cache| Box::new(AppendedNaming::<Ruby>::new(cache_of(cache))),
    capture: |maps, cache| {
        let publisher = Publisher::new(maps.take(Runtime::Ruby)?, names::RB_PROCS, "Ruby");
        Some(Box::new(RubyCapture::new(Some(publisher), cache_of(cache))) as Box<dyn RuntimeCapture>)
    },
    #[cfg(test)]
    capture_without_kernel: Some(|cache| Box::new(RubyCapture::new(None, cache_of(cache)))),
};
