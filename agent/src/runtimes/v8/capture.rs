//! Node.js's side of process capture: looking for V8 in each capture (`detect`, from the ELF file
//! alone), handing what was found to the kernel (`V8_PROCS`, written again at each capture: V8 maps
//! copies of its builtins as isolates start), counting and saying once per binary what cannot be
//! walked, and reading the functions and code the kernel announces before the collector moves them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use sonde_abi::{names::runtime_programs, v8::V8Proc};

use super::{Node, V8Names, detect::detect, layout::Layout};
use crate::{
    process::{ProcessInfo, RuntimeInstance},
    runtimes::{
        ProcessCounts, Runtime,
        publish::Publisher,
        refusals::Refusals,
        seam::{RingEvent, RuntimeCapture, typed},
    },
};

/// Node.js's capture state.
pub(crate) struct NodeCapture {
    /// Where found processes are handed to the kernel (`V8_PROCS`), when it walks JavaScript frames.
    publisher: Option<Publisher<V8Proc>>,
    /// Where announced functions and code are read into (the symbolizer's cache).
    names: Arc<Mutex<V8Names>>,
    /// The layout of each binary's constants, or why it is refused, by (device, inode).
    layouts: HashMap<(u64, u64), Result<Arc<Layout>, String>>,
    /// Node.js binaries it cannot walk (`node_unsupported`).
    refusals: Refusals,
}

impl NodeCapture {
    pub(crate) fn new(publisher: Option<Publisher<V8Proc>>, names: Arc<Mutex<V8Names>>) -> Self {
        Self {
            publisher,
            names,
            layouts: HashMap::new(),
            refusals: Refusals::default(),
        }
    }

    /// The V8 of `pid` (named `name`), if it runs one sonde can walk; one it cannot is counted and
    /// warned about once per binary. Its kernel settings are written (again) either way.
    fn detect(
        &mut self,
        pid: u32,
        name: &str,
        mappings: &[crate::process::Mapping],
        previous: Option<&Arc<Node>>,
        counts: &mut ProcessCounts,
    ) -> Option<Arc<Node>> {
        let node = match previous.filter(|n| n.same_image(mappings)) {
            Some(previous) => Some(previous.clone()),
            None => {
                let layouts = &mut self.layouts;
                let found = detect(mappings, |binary, symbols| {
                    layouts
                        .entry(binary.id)
                        .or_insert_with(|| Layout::new(symbols).map(Arc::new))
                        .clone()
                });
                match found {
                    Ok(found) => {
                        if let Some(node) = &found {
                            counts.found += 1;
                            tracing::debug!(pid, %name, binary = %node.binary, version = %node.version(), "Node.js found");
                        }
                        found.map(Arc::new)
                    }
                    Err(err) => {
                        let message = format!("process {pid} ({name}): {err}");
                        self.refusals.refuse(pid, &err.binary, counts, &message);
                        None
                    }
                }
            }
        };
        if let Some(publisher) = &mut self.publisher {
            publisher.captured(pid, node.as_ref().map(|n| n.kernel_settings(mappings)));
        }
        node
    }
}

/// The Node.js (V8) `process` runs, if Node.js capture found one.
pub(crate) fn node_of(process: &ProcessInfo) -> Option<Arc<Node>> {
    crate::runtimes::seam::instance_of(process, super::NAME)
}

impl RuntimeCapture for NodeCapture {
    fn runtime(&self) -> Runtime {
        Runtime::Node
    }

    fn captured(
        &mut self,
        process: &ProcessInfo,
        previous: Option<&RuntimeInstance>,
        counts: &mut ProcessCounts,
    ) -> Option<RuntimeInstance> {
        let previous = previous.and_then(typed::<Node>);
        let node = self.detect(
            process.pid,
            &process.name,
            &process.mappings,
            previous.as_ref(),
            counts,
        );
        node.map(|n| n as RuntimeInstance)
    }

    fn exited(&mut self, pid: u32) {
        if let Some(publisher) = &mut self.publisher {
            publisher.exited(pid);
        }
    }

    fn evicted(&mut self, pid: u32) {
        self.refusals.evicted(pid);
    }

    fn program_needed(&self) -> Option<u32> {
        let published = self.publisher.as_ref().is_some_and(Publisher::holds_any);
        published.then_some(runtime_programs::V8)
    }

    fn announced(&mut self, pid: u32, instance: &RuntimeInstance, event: &RingEvent) -> bool {
        let unpack = sonde_abi::v8::unpack_frame;
        V8Names::announced(&self.names, pid, instance, &event.head, unpack)
    }
}
