//! JavaScript frames in symbolized stacks: the V8 walker stores them in place among the native
//! frames (`sonde_abi::v8` kinds); functions and code are named from what [`V8Names`] read of the
//! process (filled by the capture as the kernel announces them), builtins and stubs (markers, which
//! hold a pc) as native code under their V8 name.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, MutexGuard},
};

use sonde_abi::{
    runtime_frame::{self, RuntimeFrame},
    v8,
};

use super::{V8Names, marker_name, node_of};
use crate::{
    process::ProcessInfo,
    profile::{Frame, Symbol},
    runtimes::{Outcome, Runtime, seam::RuntimeNames},
};

/// Whether `kind` is one of V8's.
fn is_v8_kind(kind: u64) -> bool {
    (runtime_frame::kind::FIRST_V8..=runtime_frame::kind::LAST).contains(&kind)
}

/// Names JavaScript frames from the shared [`V8Names`].
pub(crate) struct NodeNaming {
    names: Arc<Mutex<V8Names>>,
}

impl NodeNaming {
    pub(crate) fn new(names: Arc<Mutex<V8Names>>) -> Self {
        Self { names }
    }

    fn names(&self) -> MutexGuard<'_, V8Names> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RuntimeNames for NodeNaming {
    fn runtime(&self) -> Runtime {
        Runtime::Node
    }

    fn owns(&self, kind: u64) -> bool {
        is_v8_kind(kind)
    }

    fn resolve(&self, process: &ProcessInfo, ips: &[u64]) {
        let Some(node) = node_of(process) else { return };
        let mut names = self.names();
        for frame in crate::runtimes::stack_words::runtime_frames(ips)
            .filter(|f| is_v8_kind(f.kind) && f.kind != v8::kind::MARKER)
        {
            names.resolve(process.pid, &node, frame);
        }
    }

    fn frame(
        &self,
        process: Option<&ProcessInfo>,
        frame: RuntimeFrame,
        native: &dyn Fn(u64) -> Frame,
    ) -> Option<(Frame, Outcome)> {
        let process = process?;
        let node = node_of(process)?;
        if frame.kind != v8::kind::MARKER {
            return Some(self.names().frame(process.pid, &node, frame));
        }
        // A builtin or stub: named as native code, under its V8 name.
        let mut named = native(frame.address);
        let native_name = named.symbols.last().map(|s| s.name.as_str());
        let name = marker_name(native_name, &node, u64::from(frame.position));
        named.symbols = Arc::from(vec![Symbol {
            name,
            file: None,
            line: None,
        }]);
        Some((named, Outcome::Named))
    }

    fn trim(&mut self) {
        self.names().trim();
    }

    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, pids: &HashSet<u32>) {
        self.names().retain(pids);
    }
}
