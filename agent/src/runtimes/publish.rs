//! Keeps a runtime's per-process kernel settings (`PY_PROCS`, `GO_PROCS`) in step with the process
//! table: written when a capture finds the runtime, removed when the process exits or execs into
//! something else. One publisher per runtime map, the same mechanism for each.

use std::collections::HashSet;

use aya::maps::{HashMap, MapData};
use sonde_abi::FileKey;

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

/// A runtime's settings by binary file (`PY_FILES`), where they follow from the file alone: written
/// once per file and kept while sonde runs (a file's settings never change; a replaced file is
/// another inode). Beyond the map's size, further binaries' processes wait for their capture.
pub(crate) struct FilePublisher<V: aya::Pod> {
    map: HashMap<MapData, FileKey, V>,
    written: HashSet<FileKey>,
    /// Whether a refused write was logged (once).
    refused: bool,
}

impl<V: aya::Pod> FilePublisher<V> {
    pub(crate) fn new(map: HashMap<MapData, FileKey, V>) -> Self {
        Self {
            map,
            written: HashSet::new(),
            refused: false,
        }
    }

    /// Settings for `file`, found in a process mapping it.
    pub(crate) fn publish(&mut self, file: FileKey, settings: V) {
        if self.written.contains(&file) {
            return;
        }
        match self.map.insert(file, settings, 0) {
            Ok(()) => {
                self.written.insert(file);
            }
            Err(err) if !self.refused => {
                self.refused = true;
                tracing::debug!(%err, "a runtime's settings by binary were refused (the map is full?); its new processes wait for their capture");
            }
            Err(_) => {}
        }
    }
}
