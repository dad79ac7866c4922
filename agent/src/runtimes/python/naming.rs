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
    runtimes::{FrameTally, Runtime, merge::merge_appended, seam::RuntimeNames},
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
        let words: Vec<_> = ips
            .iter()
            .filter_map(|&w| unpack_frame(w))
            .map(|w| (w, w.entry))
            .collect();
        let interpreter = process.and_then(|p| Some((p.pid, interpreter_of(p)?)));
        let names = self.names();
        let name = interpreter
            .as_ref()
            .map(|(pid, interpreter)| move |w: &_| names.frame(*pid, interpreter, *w));
        let is_eval = |frames: &[Frame], i: usize| {
            frames[i]
                .function()
                .is_some_and(|name| name.starts_with(EVAL_FRAME))
        };
        merge_appended(
            native,
            &words,
            name.as_ref().map(|f| f as _),
            is_eval,
            tally,
        )
    }

    fn trim(&mut self) {
        self.names().trim();
    }

    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, pids: &HashSet<u32>) {
        self.names().retain(pids);
    }
}
