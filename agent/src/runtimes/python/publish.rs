//! Keeps the kernel's per-process CPython settings (`PY_PROCS`) in step with the process table: written
//! when a capture finds an interpreter, removed when the process exits or execs into something else.

use std::collections::HashSet;

use aya::maps::{HashMap, MapData};
use sonde_abi::{names, python::PyProc};

use super::detect::Interpreter;

/// The `PY_PROCS` map and the processes written into it.
pub(crate) struct Publisher {
    map: HashMap<MapData, u32, PyProc>,
    published: HashSet<u32>,
    /// Writes the kernel refused (the map is full: more Python processes than it holds).
    pub(crate) failures: u64,
}

impl Publisher {
    pub(crate) fn new(map: HashMap<MapData, u32, PyProc>) -> Self {
        Self {
            map,
            published: HashSet::new(),
            failures: 0,
        }
    }

    /// `pid` was captured (first seen, after an exec, or again) with `python` found in it, or not.
    pub(crate) fn captured(&mut self, pid: u32, python: Option<&Interpreter>) {
        match python {
            Some(interpreter) => match self.map.insert(pid, interpreter.kernel_settings(), 0) {
                Ok(()) => {
                    self.published.insert(pid);
                }
                Err(e) => {
                    self.failures += 1;
                    tracing::warn!(
                        pid,
                        map = names::PY_PROCS,
                        "cannot hand the Python interpreter of process {pid} to the kernel ({e}); its stacks keep native frames only"
                    );
                }
            },
            None => self.exited(pid),
        }
    }

    /// `pid` is gone: its settings must not outlive it (a new process may reuse the id).
    pub(crate) fn exited(&mut self, pid: u32) {
        if self.published.remove(&pid) {
            let _ = self.map.remove(&pid);
        }
    }
}
