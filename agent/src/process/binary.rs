//! The process-independent half of a capture: a binary file kept open and one executable mapping.
//! Below the process table and the runtimes, which both hold them.

use std::{fs::File, path::PathBuf, sync::Arc};

use crate::{
    process::{
        elf_info::{ElfInfo, RuntimeFacts},
        untrusted,
    },
    profile::Module,
};

/// The module path of anonymous executable memory: code a JIT compiler generated.
pub(crate) const JIT_PATH: &str = "[jit]";

/// A binary file kept open for symbolization.
#[derive(Debug)]
pub(crate) struct Binary {
    /// (device, inode): the identity used for caching.
    pub id: (u64, u64),
    /// Path the process mapped it from (as seen in its mount namespace).
    pub path: String,
    /// Open handle; symbolized through `/proc/self/fd/N` so it works after the process exits.
    pub file: File,
    /// Segments, build id and symbol sections.
    pub elf: ElfInfo,
    /// What the runtimes read of it when it was first opened (`ElfReader`), each of its runtime's
    /// own type: read back with [`Binary::fact`].
    pub facts: RuntimeFacts,
    /// The root directory of the first process seen mapping it (`/proc/PID/root`): debug files are
    /// looked up inside it, as that process sees the file system (containers).
    pub root: PathBuf,
    /// That process's credentials: debug files are read only if its user could read them.
    pub(crate) owner: Option<untrusted::Owner>,
}

impl Binary {
    /// GNU build id, lowercase hex.
    pub(crate) fn build_id(&self) -> Option<&str> {
        self.elf.build_id.as_deref()
    }

    /// What runtime `name` read of this binary, as its type `T`.
    pub(crate) fn fact<T: Send + Sync + 'static>(&self, name: &str) -> Option<&T> {
        self.facts
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, fact)| fact.downcast_ref::<T>())
    }

    /// A path this process can open the binary at, even if the owner exited or the file was deleted.
    pub(crate) fn open_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd as _;
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// One executable mapping of a process.
#[derive(Clone, Debug)]
pub(crate) struct Mapping {
    /// Mapped range and file offset, as a profile module.
    pub module: Arc<Module>,
    /// The file, when it is a real file (not `[vdso]` and the like) and could be opened.
    pub binary: Option<Arc<Binary>>,
}
