//! The process table's side of Node.js: looking for V8 in each capture (`runtimes::v8::detect`, from
//! the ELF file alone), handing what was found to the kernel (`V8_PROCS`, written again at each
//! capture: V8 maps copies of its builtins as isolates start), and counting and saying once per binary
//! what cannot be walked.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use sonde_abi::v8::V8Proc;

use super::{CaptureStats, Mapping};
use crate::runtimes::{
    publish::Publisher,
    v8::{Node, detect::detect, layout::Layout},
};

/// Node.js detection state of the process table.
#[derive(Default)]
pub(crate) struct NodeCapture {
    /// Whether captures look for V8.
    pub(crate) on: bool,
    /// Where found processes are handed to the kernel (`V8_PROCS`), when it walks JavaScript frames.
    publisher: Option<Publisher<V8Proc>>,
    /// The layout of each binary's constants, or why it is refused, by (device, inode).
    layouts: HashMap<(u64, u64), Result<Arc<Layout>, String>>,
    /// Processes already counted in `node_unsupported` (until evicted).
    unsupported: HashSet<u32>,
    /// Binaries whose refusal was warned about: once per binary, then debug.
    warned: HashSet<String>,
}

impl NodeCapture {
    /// Looks for V8 in every capture and keeps `V8_PROCS` in step through `publisher`.
    pub(crate) fn publish(&mut self, publisher: Publisher<V8Proc>) {
        self.on = true;
        self.publisher = Some(publisher);
    }

    /// Whether a Node.js process's settings are in `V8_PROCS`.
    pub(crate) fn published_any(&self) -> bool {
        self.publisher.as_ref().is_some_and(Publisher::holds_any)
    }

    /// The V8 of `pid` (named `name`), if it runs one sonde can walk; one it cannot is counted and
    /// warned about once per binary. Its kernel settings are written (again) either way.
    pub(crate) fn detect(
        &mut self,
        pid: u32,
        name: &str,
        mappings: &[Mapping],
        previous: Option<&Arc<Node>>,
        stats: &mut CaptureStats,
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
                            stats.node_processes += 1;
                            tracing::debug!(pid, %name, binary = %node.binary, version = %node.version(), "Node.js found");
                        }
                        found.map(Arc::new)
                    }
                    Err(err) => {
                        if self.unsupported.insert(pid) {
                            stats.node_unsupported += 1;
                        }
                        if self.warned.insert(err.binary.clone()) {
                            tracing::warn!(pid, %name, "{err}");
                        } else {
                            tracing::debug!(pid, %name, "{err}");
                        }
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

    /// `pid` exited: nothing of it may outlive it.
    pub(crate) fn exited(&mut self, pid: u32) {
        if let Some(publisher) = &mut self.publisher {
            publisher.exited(pid);
        }
    }

    /// `pid` is forgotten.
    pub(crate) fn evicted(&mut self, pid: u32) {
        self.unsupported.remove(&pid);
    }
}
