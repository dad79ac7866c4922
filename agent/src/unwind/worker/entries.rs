//! Each process's mapping entries (`PROC_MAPPINGS`): which table, and which load bias, each of its
//! executable mappings uses; and the binaries' own entries (`FILE_TABLES`) for the processes the
//! kernel walks before userspace has captured them.

use std::sync::Arc;

use super::{BinaryState, TableKey, Worker, key_of, monotonic_ns};
use crate::{
    process::{Mapping, ProcessInfo},
    runtimes::{registry, seam::JitFrame},
    unwind::mappings::{self, Unwinding},
};

impl Worker {
    /// Processes that used an evicted table get entries without it (their frames there fall back).
    pub(super) fn evicted(&mut self, keys: &[TableKey]) {
        for key in keys {
            self.files.withdraw(key);
        }
        for process in self.users(keys) {
            self.write_entries(process.pid);
        }
    }

    /// The processes that map a binary of one of `keys`.
    pub(super) fn users(&self, keys: &[TableKey]) -> Vec<Arc<ProcessInfo>> {
        self.procs
            .values()
            .filter(|p| {
                p.mappings
                    .iter()
                    .filter_map(key_of)
                    .any(|k| keys.contains(&k))
            })
            .cloned()
            .collect()
    }

    /// A table just loaded for `mapping`: its binary's own entry, and the entries of `users`, the
    /// processes that map it.
    pub(super) fn table_loaded(&mut self, mapping: &Mapping, users: &[Arc<ProcessInfo>]) {
        // The binary's own entry first, from the mapping that asked for it: the processes that
        // asked may all be gone (a compiler pass), not the next ones to run it.
        self.unwinding(mapping);
        for process in users {
            self.write_entries(process.pid);
        }
    }

    /// How the kernel walks mapping `m`; when by a table, the binary's `FILE_TABLES` entry is written
    /// too.
    fn unwinding(&mut self, m: &Mapping) -> Unwinding {
        let Some(key) = key_of(m) else {
            return Unwinding::NoInfo;
        };
        match (self.store.get(&key), self.binaries.get(&key)) {
            (Some(id), Some(BinaryState::Usable(segments))) => {
                let bias = crate::process::load_bias::load_bias(
                    m.module.start,
                    m.module.file_offset,
                    segments,
                );
                let delta = m
                    .module
                    .start
                    .wrapping_sub(m.module.file_offset)
                    .wrapping_sub(bias);
                self.files.publish(&key, m, id, delta);
                Unwinding::Table { id, bias }
            }
            (_, Some(BinaryState::Unusable)) => Unwinding::NoInfo,
            _ => Unwinding::Pending,
        }
    }

    /// How the kernel walks mapping `m` of `process`: as a runtime says its code there unwinds (JIT
    /// code on its loop's frame, with the loop's binary's table), else as its own binary.
    fn unwinding_in(&mut self, process: &ProcessInfo, m: &Mapping) -> Unwinding {
        match registry::unwind_as(process, m) {
            None => self.unwinding(m),
            Some(JitFrame::OnLoop { binary, address }) => {
                match process.mappings.get(binary).map(|b| self.unwinding(b)) {
                    Some(Unwinding::Table { id, .. }) => Unwinding::At { id, address },
                    Some(other) => other,
                    None => Unwinding::NoInfo,
                }
            }
            // The rules' table full (never seen): frame pointers.
            Some(JitFrame::Fixed(rule)) => match self.store.rule_index(rule) {
                Some(index) => Unwinding::Rule { index },
                None => Unwinding::NoInfo,
            },
        }
    }

    pub(super) fn write_entries(&mut self, pid: u32) {
        let Some(info) = self.procs.get(&pid).cloned() else {
            return;
        };
        let entries: Vec<(u64, u64, Unwinding)> = info
            .mappings
            .iter()
            .map(|m| (m.module.start, m.module.limit, self.unwinding_in(&info, m)))
            .collect();
        let (value, dropped) = mappings::proc_mappings(&entries, monotonic_ns());
        if dropped > 0 {
            self.stats
                .lock()
                .expect("unwind stats lock")
                .mappings_dropped += dropped as u64;
        }
        // A process not written (the map full, the kernel out of memory) is tried again when next
        // sampled; its samples meanwhile fall back to frame pointers (counted by the kernel).
        match self.procs_map.insert(pid, *value, 0) {
            Ok(()) => {
                self.unwritten.remove(&pid);
            }
            Err(err) => {
                tracing::debug!(pid, %err, "writing a process's mappings for the unwinder failed; retried when next sampled");
                self.unwritten.insert(pid);
                self.stats
                    .lock()
                    .expect("unwind stats lock")
                    .processes_dropped += 1;
            }
        }
    }
}
