//! Process capture: the mappings and binaries of every sampled process, taken when the kernel first
//! reports the process, so a process that exits before the window is drained can still be symbolized.
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
pub(crate) mod elf_v8;
pub(crate) mod events;
pub(crate) mod file_ids;
mod java;
pub(crate) mod load_bias;
mod maps_file;
pub(crate) mod memfd;
mod node;
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

use crate::runtimes::publish::Publisher;
pub(crate) use elf_info::{ElfInfo, Segment, inflated_dwarf_of};

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
#[derive(Clone, Debug)]
pub(crate) struct ProcessInfo {
    /// Process id.
    pub pid: u32,
    /// Executable name (from `/proc/PID/comm` of the leader).
    pub name: String,
    /// Executable mappings, sorted by start address.
    pub mappings: Vec<Mapping>,
    /// When the kernel reported the exit, if it did.
    pub exited_at: Option<Instant>,
    /// The CPython interpreter it runs, when Python detection is on and found one sonde can walk.
    pub(crate) python: Option<Arc<crate::runtimes::python::detect::Interpreter>>,
    /// The HotSpot JVM it runs, when Java detection is on and found one sonde can walk.
    pub(crate) java: Option<Arc<crate::runtimes::hotspot::Jvm>>,
    /// The Node.js (V8) it runs, when Node detection is on and found one sonde can walk.
    pub(crate) node: Option<Arc<crate::runtimes::v8::Node>>,
}

impl ProcessInfo {
    /// The mapping containing `address`.
    pub(crate) fn mapping_for(&self, address: u64) -> Option<&Mapping> {
        let idx = self.mappings.partition_point(|m| m.module.start <= address);
        let m = self.mappings.get(idx.checked_sub(1)?)?;
        (address < m.module.limit).then_some(m)
    }
}

/// Counters of the capture side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CaptureStats {
    /// Processes captured.
    pub captured: u64,
    /// Processes that were gone before they could be captured.
    pub gone: u64,
    /// Mapped files that could not be opened (frames in them stay unsymbolized, and are counted there).
    pub unopenable_files: u64,
    /// Processes whose mappings the kernel refused to show (CAP_SYS_PTRACE).
    pub maps_denied: u64,
    /// Captures of processes with at least one mapped binary that could not be opened.
    pub binaries_unopenable: u64,
    /// Processes found running a CPython interpreter sonde walks (counted once per process image).
    pub python_processes: u64,
    /// Processes running a CPython interpreter sonde cannot walk (an unsupported version): their
    /// native frames are still shown.
    pub python_unsupported: u64,
    /// Go binaries whose goroutine labels cannot be read (an unknown Go version or TLS layout).
    pub go_labels_unsupported: u64,
    /// Processes found running a HotSpot JVM sonde walks (counted once per process image).
    pub java_processes: u64,
    /// Processes running a HotSpot JVM sonde cannot walk (an unsupported version or layout, said
    /// once per `libjvm.so`): their Java frames stay `[jit]`, native frames are still shown.
    pub java_unsupported: u64,
    /// Processes whose JVM had no code cache yet when captured (starting): looked at again until it
    /// has (counted once per process).
    pub java_not_ready: u64,
    /// Of those, processes given up on (no code cache after about two minutes, or too many JVMs
    /// starting at once).
    pub java_abandoned: u64,
    /// Processes found running Node.js sonde walks (counted once per process image).
    pub node_processes: u64,
    /// Processes running a V8 sonde cannot walk (an unsupported version or layout, said once per
    /// binary): their JavaScript frames stay `[jit]`, native frames are still shown.
    pub node_unsupported: u64,
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
    /// Whether captures look for a CPython interpreter (`--python`).
    python: bool,
    /// Processes already counted in `python_unsupported` (until evicted).
    python_unsupported: HashSet<u32>,
    /// Interpreter binaries whose refusal was warned about: once per binary, then debug.
    python_warned: HashSet<String>,
    /// Whether an interpreter's memory was refused and warned about: once, then debug.
    python_memory_warned: bool,
    /// Where found interpreters are handed to the kernel (`PY_PROCS`), when it walks Python frames.
    python_publisher: Option<Publisher<sonde_abi::python::PyProc>>,
    /// Where Go processes are described to the kernel (`GO_PROCS`), when it reads goroutine labels.
    go_publisher: Option<Publisher<sonde_abi::go::GoProc>>,
    /// The label settings of each Go binary seen (None: its labels cannot be read), by identity.
    go_settings: HashMap<(u64, u64), Option<sonde_abi::go::GoProc>>,
    /// Java detection, its kernel settings and its retries.
    java: java::JavaCapture,
    /// Node.js detection and its kernel settings.
    node: node::NodeCapture,
    /// Capture counters.
    pub stats: CaptureStats,
}

impl ProcessTable {
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

    /// Whether captures look for a CPython interpreter in each process (tests; the sampler publishes).
    #[cfg(test)]
    pub(crate) fn set_python(&mut self, on: bool) {
        self.python = on;
    }

    /// Whether captures look for a HotSpot JVM in each process (tests; the sampler publishes).
    #[cfg(test)]
    pub(crate) fn set_java(&mut self, on: bool) {
        self.java.on = on;
    }

    /// Looks for CPython in every capture and keeps the kernel's `PY_PROCS` in step: written at each
    /// capture that finds an interpreter, removed at exit or at an exec into something else.
    pub(crate) fn publish_python(&mut self, publisher: Publisher<sonde_abi::python::PyProc>) {
        self.python = true;
        self.python_publisher = Some(publisher);
    }

    /// Looks for HotSpot in every capture and keeps the kernel's `HS_PROCS` in step: written at each
    /// capture that finds a JVM, removed at exit or at an exec into something else.
    pub(crate) fn publish_java(&mut self, publisher: Publisher<sonde_abi::hotspot::HsProc>) {
        self.java.publish(publisher);
    }

    /// Looks for V8 in every capture and keeps the kernel's `V8_PROCS` in step: written at each
    /// capture that finds Node.js, removed at exit or at an exec into something else.
    pub(crate) fn publish_node(&mut self, publisher: Publisher<sonde_abi::v8::V8Proc>) {
        self.node.publish(publisher);
    }

    /// The runtimes whose kernel program a published process needs, by
    /// `sonde_abi::names::runtime_programs` index.
    pub(crate) fn runtimes_published(&self) -> impl Iterator<Item = u32> + use<> {
        use sonde_abi::names::runtime_programs::{JAVA, V8};
        let found = [
            (JAVA, self.java.published_any()),
            (V8, self.node.published_any()),
        ];
        found
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(index, _)| index)
    }

    /// Looks again at JVMs that had no code cache when captured (they were starting), those whose
    /// delay is over: cheap when none is waited for. Call often (the event thread does, every 50 ms).
    pub(crate) fn retry_java(&mut self) {
        if !self.java.has_pending() {
            return;
        }
        for pid in self.java.due(Instant::now()) {
            let Some(info) = self.procs.get(&pid).filter(|p| p.exited_at.is_none()) else {
                self.java.evicted(pid);
                continue;
            };
            let (name, mappings) = (info.name.clone(), info.mappings.clone());
            let Some(jvm) = self
                .java
                .detect(pid, &name, &mappings, None, &mut self.stats)
            else {
                continue;
            };
            self.stats.java_processes += 1;
            self.java.captured(pid, Some(&jvm));
            if let Some(info) = self.procs.get_mut(&pid) {
                Arc::make_mut(info).java = Some(jvm);
            }
        }
    }

    /// Describes every captured Go process to the kernel (`GO_PROCS`), so it reads goroutine labels.
    pub(crate) fn publish_go(&mut self, publisher: Publisher<sonde_abi::go::GoProc>) {
        self.go_publisher = Some(publisher);
    }

    /// The kernel's settings for the Go executable among `mappings`, read once per binary, with the
    /// process's load bias; a binary whose labels cannot be read is counted and said once (its roots
    /// are still published).
    fn go_settings(&mut self, pid: u32, mappings: &[Mapping]) -> Option<sonde_abi::go::GoProc> {
        let (module, binary) = mappings
            .iter()
            .find_map(|m| Some((&m.module, m.binary.as_ref().filter(|b| b.elf.is_go)?)))?;
        let stats = &mut self.stats;
        let settings = self.go_settings.entry(binary.id).or_insert_with(|| {
            let (settings, labels) = crate::runtimes::go::kernel_settings(binary)?;
            if let Err(why) = labels {
                stats.go_labels_unsupported += 1;
                tracing::warn!(pid, binary = %binary.path, "goroutine labels not read: {why}");
            }
            Some(settings)
        });
        let mut settings = (*settings)?;
        // A PIE Go binary runs where it was loaded; its root ranges are link-time addresses.
        settings.bias = module
            .start
            .wrapping_sub(binary.elf.vaddr_of(module.file_offset));
        Some(settings)
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

    /// Captures `pid` now (again after an exec, or when new code was mapped). None when the process
    /// is already gone.
    pub(crate) fn capture(&mut self, pid: u32) -> Option<Arc<ProcessInfo>> {
        match self.read_process(pid) {
            Ok(info) => {
                // A process is captured again after an exec or new mappings: count its interpreter
                // once per image.
                let known_python = self.procs.get(&pid).is_some_and(|p| p.python.is_some());
                if info.python.is_some() && !known_python {
                    self.stats.python_processes += 1;
                }
                if let Some(publisher) = &mut self.python_publisher {
                    publisher.captured(pid, info.python.as_ref().map(|i| i.kernel_settings()));
                }
                let known_java = self.procs.get(&pid).is_some_and(|p| p.java.is_some());
                if info.java.is_some() && !known_java {
                    self.stats.java_processes += 1;
                }
                self.java.captured(pid, info.java.as_deref());
                if self.go_publisher.is_some() {
                    let settings = self.go_settings(pid, &info.mappings);
                    if let Some(publisher) = &mut self.go_publisher {
                        publisher.captured(pid, settings);
                    }
                }
                let info = Arc::new(info);
                self.procs.insert(pid, info.clone());
                self.denied.remove(&pid);
                self.stats.captured += 1;
                Some(info)
            }
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

    /// Captures `pid` unless it is already known (or its mappings were refused already).
    pub(crate) fn ensure(&mut self, pid: u32) -> Option<Arc<ProcessInfo>> {
        if !self.procs.contains_key(&pid) && !self.denied.contains(&pid) {
            self.capture(pid);
        }
        self.get(pid)
    }

    /// Records that `pid` exited; its data stays until [`ProcessTable::evict_exited_before`].
    pub(crate) fn mark_exited(&mut self, pid: u32, at: Instant) {
        self.denied.remove(&pid);
        if let Some(publisher) = &mut self.python_publisher {
            publisher.exited(pid);
        }
        if let Some(publisher) = &mut self.go_publisher {
            publisher.exited(pid);
        }
        self.java.exited(pid);
        self.node.exited(pid);
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
            self.python_unsupported.remove(pid);
            self.java.evicted(*pid);
            self.node.evicted(*pid);
        }
        self.binaries.retain(|_, b| b.strong_count() > 0);
        let binaries = &self.binaries;
        self.go_settings.retain(|id, _| binaries.contains_key(id));
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
        let mut attempts = 0;
        let (name, mut mappings, unopenable) = loop {
            attempts += 1;
            let (name, lines) = maps_file::read(pid)?;
            let mut unopenable = Vec::new();
            let mappings: Vec<Mapping> = lines
                .into_iter()
                .map(|line| self.mapping(pid, line, &mut unopenable))
                .collect();
            // A mapping that changed between the read and the open (its map_files range is gone) is a
            // race with the process, not a refusal: read again.
            if attempts < OPEN_ATTEMPTS && unopenable.iter().any(|(_, why)| why.range_gone()) {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            break (name, mappings, unopenable);
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
        let python = if self.python {
            // Captured again after new code was mapped: the same interpreter, and the code objects
            // read through it (announced once, and gone with the process if it exits).
            let previous = self.procs.get(&pid).and_then(|p| p.python.clone());
            self.python(pid, &name, &mappings)
                .map(|found| match previous {
                    Some(previous) if previous.same_image(&found) => previous,
                    _ => found,
                })
        } else {
            None
        };
        let java = match self.java.on {
            true => {
                let previous = self.procs.get(&pid).and_then(|p| p.java.clone());
                self.java
                    .detect(pid, &name, &mappings, previous.as_ref(), &mut self.stats)
            }
            false => None,
        };
        let node = match self.node.on {
            true => {
                let previous = self.procs.get(&pid).and_then(|p| p.node.clone());
                self.node
                    .detect(pid, &name, &mappings, previous.as_ref(), &mut self.stats)
            }
            false => None,
        };
        Ok(ProcessInfo {
            pid,
            name,
            mappings,
            exited_at: None,
            python,
            java,
            node,
        })
    }

    /// The CPython interpreter of `pid`, if it runs one sonde can walk; one it cannot is counted and
    /// warned about once per binary.
    fn python(
        &mut self,
        pid: u32,
        name: &str,
        mappings: &[Mapping],
    ) -> Option<Arc<crate::runtimes::python::detect::Interpreter>> {
        match crate::runtimes::python::detect::detect(pid, mappings) {
            Ok(found) => {
                if let Some(interpreter) = &found {
                    tracing::debug!(pid, %name, binary = %interpreter.binary, version = ?interpreter.version, runtime = interpreter.runtime, "CPython found");
                }
                found.map(Arc::new)
            }
            Err(err) => {
                match err.binary() {
                    Some(binary) => {
                        if self.python_unsupported.insert(pid) {
                            self.stats.python_unsupported += 1;
                        }
                        if self.python_warned.insert(binary.to_owned()) {
                            tracing::warn!(pid, %name, "{err}");
                        } else {
                            tracing::debug!(pid, %name, "{err}");
                        }
                    }
                    // The process exited while it was read.
                    None if maps_file::is_gone(pid) => tracing::debug!(pid, %name, "{err}"),
                    // Its memory is refused: say once what to grant.
                    None => warn_once(
                        &mut self.python_memory_warned,
                        &format!("process {pid} ({name}): {err}; its Python frames stay unnamed"),
                    ),
                }
                None
            }
        }
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
        let binary = Arc::new(Binary {
            id,
            path: line.path.clone(),
            elf: ElfInfo::read(&file),
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
fn warn_once(warned: &mut bool, message: &str) {
    if std::mem::replace(warned, true) {
        tracing::debug!("{message}");
    } else {
        tracing::warn!("{message}; further ones are logged at debug level");
    }
}
