//! Keeps a runtime's per-process kernel settings (`PY_PROCS`, `GO_PROCS`) in step with the process
//! table: written when a capture finds the runtime, removed when the process exits or execs into
//! something else. One publisher per runtime map, the same mechanism for each.

use std::collections::HashSet;

use aya::maps::{HashMap, MapData};

/// A runtime's settings map and the processes written into it.
pub(crate) struct Publisher<V: aya::Pod> {
    map: HashMap<MapData, u32, V>,
    /// The map's name and the runtime's, for messages.
    names: (&'static str, &'static str),
    published: HashSet<u32>,
    /// Writes the kernel refused (the map is full: more processes of the runtime than it holds).
    pub(crate) failures: u64,
}

impl<V: aya::Pod> Publisher<V> {
    /// `map` is named `map_name`; `runtime` names what it describes in messages.
    pub(crate) fn new(
        map: HashMap<MapData, u32, V>,
        map_name: &'static str,
        runtime: &'static str,
    ) -> Self {
        Self {
            map,
            names: (map_name, runtime),
            published: HashSet::new(),
            failures: 0,
        }
    }

    /// `pid` was captured (first seen, after an exec, or again) with `settings` for the runtime
    /// found in it, or none.
    pub(crate) fn captured(&mut self, pid: u32, settings: Option<V>) {
        match settings {
            Some(settings) => match self.map.insert(pid, settings, 0) {
                Ok(()) => {
                    self.published.insert(pid);
                }
                Err(e) => {
                    self.failures += 1;
                    let (map, runtime) = self.names;
                    tracing::warn!(
                        pid,
                        map,
                        "cannot hand the {runtime} runtime of process {pid} to the kernel ({e}); its stacks go without it"
                    );
                }
            },
            None => self.exited(pid),
        }
    }

    /// Whether the kernel holds settings of any process: a runtime's kernel program is needed.
    pub(crate) fn holds_any(&self) -> bool {
        !self.published.is_empty()
    }

    /// `pid` is gone: its settings must not outlive it (a new process may reuse the id).
    pub(crate) fn exited(&mut self, pid: u32) {
        if self.published.remove(&pid) {
            let _ = self.map.remove(&pid);
        }
    }
}
