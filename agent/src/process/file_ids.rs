//! Ids of binary files for file-relative frames (`sonde_abi::unwind::FRAME_FILE`): the unwinder gives
//! a binary an id when it tells the kernel where the binary's table is (`FILE_TABLES`), the kernel
//! stores frames of processes userspace never captured as (id, ELF address), and the symbolizer names
//! them through the id. Ids are never reused while the agent runs; each keeps its binary open, so a
//! frame is named after every process that mapped the binary has exited.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use sonde_abi::unwind::MAX_FILE_IDS;

use super::Binary;
use crate::profile::Module;

/// Binaries with ids at most: each holds an open file. Beyond it, new binaries' frames are stored as
/// process addresses (named only if userspace captures the process).
const MAX_FILES: usize = 16_384;
const _: () = assert!(MAX_FILES < MAX_FILE_IDS as usize);

/// One binary with an id.
#[derive(Clone)]
pub(crate) struct FileEntry {
    /// The binary, open.
    pub(crate) binary: Arc<Binary>,
    /// The module file frames of it carry: addresses are file offsets.
    pub(crate) module: Arc<Module>,
    /// `p_vaddr - p_offset` of its executable segment: `file offset = ELF address - delta`.
    pub(crate) delta: u64,
}

impl FileEntry {
    /// The file offset of ELF address `addr`.
    pub(crate) fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.delta)
    }
}

/// The shared id registry; cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct FileIds {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    by_binary: HashMap<(u64, u64), u32>,
    /// Entry of id `i + 1`.
    entries: Vec<FileEntry>,
}

impl FileIds {
    /// The id of `binary`, given one now if it has none; None when the registry is full.
    pub(crate) fn assign(&self, binary: &Arc<Binary>, delta: u64) -> Option<u32> {
        let mut inner = self.inner.lock().expect("file ids lock");
        if let Some(&id) = inner.by_binary.get(&binary.id) {
            return Some(id);
        }
        if inner.entries.len() >= MAX_FILES {
            return None;
        }
        inner.entries.push(FileEntry {
            binary: binary.clone(),
            module: Arc::new(Module {
                path: binary.path.clone(),
                build_id: binary.build_id().map(str::to_owned),
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
            }),
            delta,
        });
        let id = inner.entries.len() as u32;
        inner.by_binary.insert(binary.id, id);
        Some(id)
    }

    /// The binary of `id`.
    pub(crate) fn get(&self, id: u32) -> Option<FileEntry> {
        let inner = self.inner.lock().expect("file ids lock");
        inner.entries.get(id.checked_sub(1)? as usize).cloned()
    }
}

/// The kernel's encoding of a device number (`MKDEV`: major << 20 | minor), from userspace's `st_dev`.
pub(crate) fn kernel_dev(st_dev: u64) -> u32 {
    let (major, minor) = (libc::major(st_dev), libc::minor(st_dev));
    (major << 20) | (minor & 0xf_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_dev_matches_the_kernels_encoding() {
        // /dev/vda1 is 254:1 on these machines; the kernel's dev_t is major << 20 | minor, while glibc
        // packs st_dev differently (makedev).
        let st_dev = libc::makedev(254, 1);
        assert_eq!(kernel_dev(st_dev), 254 << 20 | 1);
        assert_eq!(kernel_dev(libc::makedev(8, 300)), 8 << 20 | 300);
    }
}
