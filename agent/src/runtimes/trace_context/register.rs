//! The thread context as one registration (`super::super::seam::Registration`): what the registry
//! lists.

use std::sync::Arc;

use sonde_abi::names::{self, globals};

use super::{capture::TraceContextCapture, elf, figures};
use crate::runtimes::{
    Runtime,
    publish::Publisher,
    seam::{KernelSide, Registration, RuntimeCapture, RuntimeNames},
};

/// The OpenTelemetry thread context.
pub(crate) const REGISTRATION: Registration = Registration {
    runtime: Runtime::TraceContext,
    // Reads the sampled thread's span into the sample's labels (agent-ebpf `thread_ctx.rs`).
    kernel: KernelSide {
        runtime: Runtime::TraceContext,
        procs_map: names::TC_PROCS,
        files_map: None,
        other_maps: &[names::SAMPLE_LABELS],
        global: globals::THREAD_CTX,
        needs_tables: false,
        needs_thread_pointer: true,
        in_legacy: true,
    },
    elf: elf::READER,
    figures: figures::FIGURES,
    families: &[],
    fuzz: &[],
    unwind: None,
    unwind_as: None,
    identify: None,
    resource: Some(|pid| {
        super::process_ctx::read(pid)
            .map(|p| p.resource)
            .unwrap_or_default()
    }),
    cache: || Arc::new(()),
    namer: |_| Box::new(NoNames),
    capture: |maps, _| {
        let publisher = Publisher::new(
            maps.take(Runtime::TraceContext)?,
            names::TC_PROCS,
            "trace context",
        );
        Some(Box::new(TraceContextCapture::new(publisher)) as Box<dyn RuntimeCapture>)
    },
    #[cfg(test)]
    capture_without_kernel: None,
};

/// It names no frames: its spans are labels.
struct NoNames;

impl RuntimeNames for NoNames {
    fn runtime(&self) -> Runtime {
        Runtime::TraceContext
    }
}
