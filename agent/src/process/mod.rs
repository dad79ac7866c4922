//! What a process is to sonde: its mappings and binaries, read when the kernel first reports the
//! process, so a process that exits before the window is drained can still be symbolized. The data
//! model below every other area; what happens when a process appears (its runtimes, its unwind
//! tables) is `crate::capture`'s.
//!
//! Each executable mapping's file is opened through `/proc/PID/map_files/` (which works across mount
//! namespaces and for deleted files), or else by path inside the process's root, checked against the
//! mapping's device and inode (`open.rs`), and kept open while any live process maps it; binaries are
//! shared by device and inode. Anonymous executable mappings (JIT code) and the vDSO are kept too: the
//! unwinder needs to know that code is there.
//!
//! A process whose mappings or binaries sonde may not read is counted and warned about (once per
//! reason, then at debug level), never left silently unsymbolized.

pub(crate) mod binary;
pub(crate) mod elf_info;
pub(crate) mod file_ids;
pub(crate) mod load_bias;
mod maps_file;
pub(crate) mod memfd;
mod open;
pub(crate) mod untrusted;
mod vdso;

use std::{
    collections::{HashMap, HashSet},
    fs::File,
    os::unix::fs::MetadataExt as _,
    sync::Arc,
    time::Instant,
};

pub(crate) use binary::{Binary, JIT_PATH, Mapping};
pub(crate) use vdso::VDSO_PATH;

pub(crate) use elf_info::{ElfInfo, ElfReader, RuntimeFact, Segment, inflated_dwarf_of};

use crate::profile::Module;
pub(crate) use maps_file::MapsLine;
pub(crate) use maps_file::set_proc_root;
pub(crate) use maps_file::{
    executable, has_live_threads, is_gone, listed_pids, numbered_entries, parse_maps, proc_dir,
};

/// Reads of a process's mappings before a file whose mapping changed under the read counts as
/// unopenable.
const OPEN_ATTEMPTS: u32 = 3;

/// What sonde knows about one process.
#[derive(Clone)]
pub(crate) struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Executable name (from `/proc/PID/comm` of the leader).
    pub name: String,
    /// Executable mappings, sorted by start address.
    pub mappings: Vec<Mapping>,
    /// When the kernel reported the exit, if it did.
    pub exited_at: Option<Instant>,
    /// The language runtimes found in it, by runtime name: what `crate::runtimes` detected, opaque
    /// here (the data model knows no runtime; each reads its own back by type).
    pub(crate) runtimes: Vec<(&'static str, RuntimeInstance)>,
}

/// A language runtime found in a process (an interpreter, a JVM, a V8): a `crate::runtimes` type.
pub(crate) type RuntimeInstance = Arc<dyn std::any::Any + Send + Sync>;

impl ProcessInfo {
    /// The mapping containing `address`.
    pub(crate) fn mapping_for(&self, address: u64) -> Option<&Mapping> {
        let idx = self.mappings.partition_point(|m| m.module.start <= address);
        let m = self.mappings.get(idx.checked_sub(1)?)?;
        (address < m.module.limit).then_some(m)
    }

    /// What runtime `name` found in it.
    pub(crate) fn runtime(&self, name: &str) -> Option<&RuntimeInstance> {
        self.runtimes
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, instance)| instance)
    }
}

impl std::fmt::Debug for ProcessInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let runtimes: Vec<&str> = self.runtimes.iter().map(|(name, _)| *name).collect();
        f.debug_struct("ProcessInfo")
            .field("pid", &self.pid)
            .field("name", &self.name)
            .field("mappings", &self.mappings)
            .field("exited_at", &self.exited_at)
            .field("runtimes", &runtimes)
            .finish()
    }
}

/// Counters of the capture side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CaptureStats {
    /// Processes captured.
    pub captured: u64,
    /// Processes that were gone before they could be captured.
    pub gone: u64,
    /// Processes that exited while their files were opened, captured from what was read of them.
    pub captured_exited: u64,
    /// Mapped files that could not be opened (frames in them stay unsymbolized, and are counted there).
    pub unopenable_files: u64,
    /// Processes whose mappings the kernel refused to show (CAP_SYS_PTRACE).
    pub maps_denied: u64,
    /// Captures of processes with at least one mapped binary that could not be opened.
    pub binaries_unopenable: u64,
}

/// All known processes and their binaries.
#[derive(Default)]
pub(crate) struct ProcessTable {
    procs: HashMap<u32, Arc<ProcessInfo>>,
    binaries: HashMap<(u64, u64), std::sync::Weak<Binary>>,
    /// The vDSO image, once read (None inside: it could not be).
    vdso: Option<Option<Arc<Binary>>>,
    /// Live processes whose mappings were refused: not asked again until captured explicitly.
    denied: HashSet<u32>,
    /// Which refusals were warned about already (maps, binaries): once each, then debug.
    warned: (bool, bool),
    /// Capture counters.
    pub stats: CaptureStats,
    /// What the runtimes read of each binary as it is first opened.
    elf_readers: &'static [ElfReader],
}

impl ProcessTable {
    /// An empty table whose binaries are also read by `elf_readers` (the runtimes').
    pub(crate) fn with_readers(elf_readers: &'static [ElfReader]) -> Self {
        Self {
            elf_readers,
            ..Self::default()
        }
    }

    /// The vDSO binary, read once.
    fn vdso(&mut self) -> Option<Arc<Binary>> {
        self.vdso
            .get_or_insert_with(|| {
                vdso::binary()
                    .inspect_err(|err| {
                        tracing::warn!(%err, "cannot copy the vDSO: its frames stay unsymbolized")
                    })
                    .ok()
            })
            .clone()
    }

    /// The captured process `pid`.
    pub(crate) fn get(&self, pid: u32) -> Option<Arc<ProcessInfo>> {
        self.procs.get(&pid).cloned()
    }

    /// Forgets what `pid` ran before an exec: a capture after it finds a new image, and nothing read
    /// through the old one's runtimes (kept across captures of one image) may name the new one's
    /// frames, even where the same interpreter sits at the same address (a non-PIE `python3`).
    pub(crate) fn forget_image(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Reads `pid` now (again after an exec, or when new code was mapped): its name and mappings,
    /// its binaries opened. None when the process is gone or its mappings are refused (counted, and
    /// warned about once).
    pub(crate) fn read(&mut self, pid: u32) -> Option<ProcessInfo> {
        match self.read_process(pid) {
            Ok(info) => Some(info),
            Err(maps_file::Unreadable::Gone) => {
                self.stats.gone += 1;
                None
            }
            Err(maps_file::Unreadable::Denied(name, err)) => {
                self.stats.maps_denied += 1;
                self.denied.insert(pid);
                warn_once(
                    &mut self.warned.0,
                    &format!(
                        "cannot read the mappings of process {pid} ({name}): {}/maps refused ({err}): sonde needs CAP_SYS_PTRACE to read other users' processes; its frames stay unnamed (counted in sonde_processes_unreadable_total{{reason=\"maps_denied\"}})",
                        maps_file::proc_dir(pid).display()
                    ),
                );
                None
            }
        }
    }

    /// Holds `info`, just read (with what its runtimes found), in place of what was held for it.
    pub(crate) fn insert(&mut self, info: ProcessInfo) -> Arc<ProcessInfo> {
        let info = Arc::new(info);
        self.procs.insert(info.pid, info.clone());
        self.denied.remove(&info.pid);
        self.stats.captured += 1;
        info
    }

    /// Sets what runtime `name` found in `pid` late (after the process was captured), in place of
    /// what it had found before, if anything.
    pub(crate) fn set_runtime(&mut self, pid: u32, name: &'static str, instance: RuntimeInstance) {
        if let Some(info) = self.procs.get_mut(&pid) {
            let runtimes = &mut Arc::make_mut(info).runtimes;
            runtimes.retain(|(n, _)| *n != name);
            runtimes.push((name, instance));
        }
    }

    /// Whether `pid` is neither held nor refused already: a capture would read it.
    pub(crate) fn unknown(&self, pid: u32) -> bool {
        !self.procs.contains_key(&pid) && !self.denied.contains(&pid)
    }

    /// Records that `pid` exited; its data stays until [`ProcessTable::evict_exited_before`].
    pub(crate) fn mark_exited(&mut self, pid: u32, at: Instant) {
        self.denied.remove(&pid);
        if let Some(info) = self.procs.get_mut(&pid) {
            Arc::make_mut(info).exited_at = Some(at);
        }
    }

    /// Forgets processes that exited before `cutoff` (their last samples are already drained).
    pub(crate) fn evict_exited_before(&mut self, cutoff: Instant) -> Vec<u32> {
        let gone: Vec<u32> = self
            .procs
            .iter()
            .filter(|(_, p)| p.exited_at.is_some_and(|t| t < cutoff))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in &gone {
            self.procs.remove(pid);
        }
        self.binaries.retain(|_, b| b.strong_count() > 0);
        gone
    }

    /// Identities of the binaries mapped by the processes held.
    pub(crate) fn live_binaries(&self) -> std::collections::HashSet<(u64, u64)> {
        self.procs
            .values()
            .flat_map(|p| {
                p.mappings
                    .iter()
                    .filter_map(|m| m.binary.as_ref().map(|b| b.id))
            })
            .collect()
    }

    /// Number of processes held.
    pub(crate) fn len(&self) -> usize {
        self.procs.len()
    }

    /// Processes held that are not marked exited.
    pub(crate) fn live_pids(&self) -> Vec<u32> {
        self.procs
            .values()
            .filter(|p| p.exited_at.is_none())
            .map(|p| p.pid)
            .collect()
    }

    fn read_process(&mut self, pid: u32) -> Result<ProcessInfo, maps_file::Unreadable> {
        self.read_process_with(pid, maps_file::read)
    }

    /// [`Self::read_process`], reading the maps file with `read_maps`.
    fn read_process_with(
        &mut self,
        pid: u32,
        mut read_maps: impl FnMut(u32) -> Result<(String, Vec<MapsLine>), maps_file::Unreadable>,
    ) -> Result<ProcessInfo, maps_file::Unreadable> {
        let mut attempts = 0;
        let mut read_before = None;
        let (name, mut mappings, unopenable, exited_at) = loop {
            attempts += 1;
            let (name, lines) = match read_maps(pid) {
                Ok(read) => read,
                // Gone while its files were opened (a compiler pass lives a few milliseconds, and
                // opening a large binary the first time takes longer on a busy node): what was
                // read names the frames it left, and gives the unwinder its binaries, whose tables
                // the program's next run is walked with from its first sample.
                Err(maps_file::Unreadable::Gone) if let Some(read) = read_before.take() => {
                    let (name, mappings, unopenable) = read;
                    self.stats.captured_exited += 1;
                    break (name, mappings, unopenable, Some(Instant::now()));
                }
                Err(e) => return Err(e),
            };
            let mut unopenable = Vec::new();
            let mappings: Vec<Mapping> = lines
                .into_iter()
                .map(|line| self.mapping(pid, line, &mut unopenable))
                .collect();
            // A mapping that changed between the read and the open (its map_files range is gone) is a
            // race with the process, not a refusal: read again.
            if attempts < OPEN_ATTEMPTS && unopenable.iter().any(|(_, why)| why.range_gone()) {
                if mappings.iter().any(|m| m.binary.is_some()) {
                    read_before = Some((name, mappings, unopenable));
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            break (name, mappings, unopenable, None);
        };
        self.stats.unopenable_files += unopenable.len() as u64;
        let unopenable = unopenable.into_iter().next();
        mappings.sort_by_key(|m| m.module.start);
        // A process that exited while it was read leaves nothing to open: that is no refusal.
        if let Some((path, why)) = unopenable.filter(|_| !maps_file::is_gone(pid)) {
            self.stats.binaries_unopenable += 1;
            warn_once(
                &mut self.warned.1,
                &format!(
                    "cannot open {path}, mapped by process {pid} ({name}): {why}; its frames stay unnamed (counted in sonde_processes_unreadable_total{{reason=\"binary_unopenable\"}})"
                ),
            );
        }
        Ok(ProcessInfo {
            pid,
            name,
            mappings,
            exited_at,
            runtimes: Vec::new(),
        })
    }

    /// The mapping of `line`; a file that could not be opened is noted in `unopenable`.
    fn mapping(
        &mut self,
        pid: u32,
        line: MapsLine,
        unopenable: &mut Vec<(String, open::Unopenable)>,
    ) -> Mapping {
        let binary = if line.path == vdso::VDSO_PATH {
            self.vdso()
        } else if line.path.starts_with('/') {
            match open::open(pid, &line) {
                Ok(file) => self.binary(pid, &line, file),
                Err(why) => {
                    tracing::debug!(pid, path = %line.path, %why, "cannot open mapped file");
                    unopenable.push((line.path.clone(), why));
                    None
                }
            }
        } else {
            None
        };
        let module = Module {
            path: if line.path.is_empty() {
                JIT_PATH.to_owned()
            } else {
                line.path.clone()
            },
            build_id: binary.as_ref().and_then(|b| b.elf.build_id.clone()),
            start: line.start,
            limit: line.end,
            file_offset: line.offset,
        };
        Mapping {
            module: Arc::new(module),
            binary,
        }
    }

    fn binary(&mut self, pid: u32, line: &MapsLine, file: File) -> Option<Arc<Binary>> {
        let meta = file.metadata().ok()?;
        let id = (meta.dev(), meta.ino());
        if let Some(existing) = self.binaries.get(&id).and_then(std::sync::Weak::upgrade) {
            return Some(existing);
        }
        let (elf, facts) = ElfInfo::read_with(&file, self.elf_readers);
        let binary = Arc::new(Binary {
            id,
            path: line.path.clone(),
            elf,
            facts,
            file,
            root: maps_file::proc_dir(pid).join("root"),
            owner: untrusted::Owner::of(pid),
        });
        self.binaries.insert(id, Arc::downgrade(&binary));
        Some(binary)
    }
}

/// Logs `message` at WARN the first time (`warned` still false), at debug level afterwards: one
/// refusal says what to grant, a thousand processes refused the same way must not flood the log.
pub(crate) fn warn_once(warned: &mut bool, message: &str) {
    if std::mem::replace(warned, true) {
        tracing::debug!("{message}");
    } else {
        tracing::warn!("{message}; further ones are logged at debug level");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping whose range is gone by the time its file is opened (`map_files` has no link for it).
    fn unmapped_since() -> MapsLine {
        MapsLine {
            start: 0x1000,
            end: 0x2000,
            offset: 0,
            path: "/nonexistent/unmapped-since.so".into(),
            dev: 1,
            inode: 1,
        }
    }

    #[test]
    fn a_process_gone_while_its_files_open_keeps_what_was_read_of_it() {
        let pid = std::process::id();
        let (name, mut lines) = maps_file::read(pid).expect("reading this test's own mappings");
        let exe = lines.first().expect("an executable mapping").path.clone();
        lines.push(unmapped_since());
        let mut reads = 0;
        let mut table = ProcessTable::default();
        let info = table
            .read_process_with(pid, |_| {
                reads += 1;
                match reads {
                    1 => Ok((name.clone(), lines.clone())),
                    _ => Err(maps_file::Unreadable::Gone),
                }
            })
            .expect("captured from the first read");
        assert_eq!(reads, 2, "the gone range asks for a second read");
        assert!(info.exited_at.is_some(), "captured as exited");
        let program = info.mappings.iter().find(|m| m.module.path == exe);
        assert!(
            program.is_some_and(|m| m.binary.is_some()),
            "the program's binary was opened: its table can be built"
        );
        assert_eq!(table.stats.captured_exited, 1);

        // Gone at the first read, or with nothing opened: gone, as before.
        let mut table = ProcessTable::default();
        let gone = table.read_process_with(pid, |_| Err(maps_file::Unreadable::Gone));
        assert!(matches!(gone, Err(maps_file::Unreadable::Gone)));
        let mut reads = 0;
        let nothing = table.read_process_with(pid, |_| {
            reads += 1;
            match reads {
                1 => Ok((name.clone(), vec![unmapped_since()])),
                _ => Err(maps_file::Unreadable::Gone),
            }
        });
        assert!(matches!(nothing, Err(maps_file::Unreadable::Gone)));
        assert_eq!(table.stats.captured_exited, 0);
    }
}
