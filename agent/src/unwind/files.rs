//! What the kernel knows of binary files (`FILE_TABLES`): which table a file's code uses, for the
//! processes it walks before userspace has captured them (short-lived ones).

use std::{collections::HashMap, hash::Hash};

use aya::maps::{HashMap as BpfHashMap, MapData};
use sonde_abi::{FileKey, FileTable};

use crate::process::{
    Mapping,
    file_ids::{FileIds, kernel_dev},
};

/// The entries written, by the key `K` of the table they name.
pub(super) struct Files<K> {
    map: BpfHashMap<MapData, FileKey, FileTable>,
    ids: FileIds,
    /// Entries written, by the table they name (removed when it is evicted).
    published: HashMap<K, Vec<FileKey>>,
}

impl<K: Clone + Eq + Hash> Files<K> {
    pub(super) fn new(map: BpfHashMap<MapData, FileKey, FileTable>, ids: FileIds) -> Self {
        Self {
            map,
            ids,
            published: HashMap::new(),
        }
    }

    /// Tells the kernel that the file of `mapping` has table `table_id`, its executable segment
    /// `delta` (p_vaddr - p_offset).
    pub(super) fn publish(&mut self, key: &K, mapping: &Mapping, table_id: u32, delta: u64) {
        let Some(binary) = &mapping.binary else {
            return;
        };
        let file = FileKey {
            dev: kernel_dev(binary.id.0),
            _pad: 0,
            ino: binary.id.1,
        };
        let written = self.published.entry(key.clone()).or_default();
        if written.contains(&file) {
            return;
        }
        let Some(file_id) = self.ids.assign(binary, delta) else {
            return; // registry full: frames keep process addresses
        };
        let value = FileTable {
            table_id,
            file_id,
            delta,
        };
        match self.map.insert(file, value, 0) {
            Ok(()) => written.push(file),
            Err(err) => {
                tracing::debug!(path = %mapping.module.path, %err, "telling the kernel of a binary's table failed; new processes fall back to frame pointers there");
            }
        }
    }

    /// The tables of `key` are gone from the kernel.
    pub(super) fn withdraw(&mut self, key: &K) {
        for file in self.published.remove(key).unwrap_or_default() {
            if let Err(err) = self.map.remove(&file)
                && !crate::bpf::maps::key_absent(&err)
            {
                tracing::debug!(%err, "removing a binary's table entry failed");
            }
        }
    }
}
