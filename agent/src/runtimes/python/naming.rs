//! Python frames in symbolized stacks: the CPython walker appends them after the native frames
//! (`sonde_abi::python` words); each is named from the code objects [`PythonNames`] read (the
//! capture reads those the kernel announces), then merged in place of the evaluation loop's native
//! frames (`runtimes::merge`).

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, MutexGuard},
};

use sonde_abi::python::unpack_frame;

use super::{PythonNames, interpreter_of};
use crate::{
    process::ProcessInfo,
    profile::Frame,
    runtimes::{
        FrameTally, Runtime,
        merge::{GroupedFrame, merge},
        seam::RuntimeNames,
    },
};

/// The evaluation loop's function; `.cold` and other compiler-split parts share the prefix.
const EVAL_FRAME: &str = "_PyEval_EvalFrameDefault";

/// Names Python frames from the shared [`PythonNames`].
pub(crate) struct PythonNaming {
    names: Arc<Mutex<PythonNames>>,
}

impl PythonNaming {
    pub(crate) fn new(names: Arc<Mutex<PythonNames>>) -> Self {
        Self { names }
    }

    fn names(&self) -> MutexGuard<'_, PythonNames> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RuntimeNames for PythonNaming {
    fn runtime(&self) -> Runtime {
        Runtime::Python
    }

    fn resolve(&self, process: &ProcessInfo, ips: &[u64]) {
        let Some(interpreter) = interpreter_of(process) else {
            return;
        };
        let mut names = self.names();
        for word in ips.iter().filter_map(|&w| unpack_frame(w)) {
            names.resolve(process.pid, &interpreter, word);
        }
    }

    fn merge(
        &self,
        process: Option<&ProcessInfo>,
        ips: &[u64],
        native: Vec<Frame>,
        tally: &mut FrameTally,
    ) -> Vec<Frame> {
        let words = ips.iter().filter(|&&w| unpack_frame(w).is_some()).count() as u64;
        if words == 0 {
            return native;
        }
        let interpreter = process.and_then(|p| Some((p.pid, interpreter_of(p)?)));
        let Some((pid, interpreter)) = interpreter else {
            // Without the interpreter nothing can name them (the kernel should not have walked it).
            tally.dropped += words;
            return native;
        };
        let names = self.names();
        let python: Vec<GroupedFrame> = ips
            .iter()
            .filter_map(|&w| unpack_frame(w))
            .map(|word| GroupedFrame {
                frame: names.frame(pid, &interpreter, word),
                entry: word.entry,
            })
            .collect();
        drop(names);
        tally.frames += python.len() as u64;
        tally.unreadable += python.iter().filter(|f| f.frame.symbols.is_empty()).count() as u64;
        merge(native, python, |frames, i| {
            frames[i]
                .function()
                .is_some_and(|name| name.starts_with(EVAL_FRAME))
        })
    }

    fn trim(&mut self) {
        self.names().trim();
    }

    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, pids: &HashSet<u32>) {
        self.names().retain(pids);
    }
}
