//! The unwinder thread: builds the unwind tables of the binaries sampled processes map, loads them into
//! the kernel, and keeps each process's mapping entries (`PROC_MAPPINGS`) current. It runs beside the
//! process-event thread, never on it: until a process's tables are in, its samples are walked by frame
//! pointer, and counted as such by the kernel.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, SyncSender, TrySendError},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use sonde_abi::{PageEntry, PageKey, ProcMappings, RowBlock, UnwindRule, names};

use super::{
    UnwindStats, build,
    files::Files,
    saved::SavedTables,
    store::{StoreError, TableMaps, TableStore},
    table,
};
use crate::{
    bpf::{
        BpfError,
        maps::map_err,
        unwind_maps::{
            BLOCK_BYTES, PAGE_BUCKET_BYTES, PAGE_ENTRY_BYTES, PageHash, RowChunks, UnwindMaps,
        },
    },
    process::{Binary, Mapping, ProcessInfo, file_ids::FileIds},
    runtimes::{Runtimes, registry},
};

mod entries;

/// Requests queued before new ones are dropped (and counted): the thread may be busy building a large
/// table while a fork storm arrives.
const QUEUE: usize = 4096;

/// Which table a mapping uses: binaries are shared by build id (or file identity) across processes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TableKey {
    BuildId(String),
    File(u64, u64),
}

enum Request {
    /// The process's mappings were (re)read.
    Process(Arc<ProcessInfo>),
    /// The process is gone.
    Exited(u32),
    /// These processes had samples in the last window.
    Sampled(Vec<u32>),
    /// A table built (on a building thread).
    Built(build::Built<TableKey>),
    /// Answer once everything before it is handled and no table is building.
    Barrier(std::sync::mpsc::Sender<()>),
    Stop,
}

struct AyaTableMaps {
    rows: RowChunks,
    rules: Array<MapData, UnwindRule>,
    pages: PageHash,
}

impl TableMaps for AyaTableMaps {
    fn write_block(&mut self, index: u32, block: &RowBlock) -> Result<(), BpfError> {
        self.rows
            .write(index, block)
            .map_err(map_err(names::UNWIND_ROWS))
    }
    fn write_rule(&mut self, index: u16, rule: UnwindRule) -> Result<(), BpfError> {
        self.rules
            .set(u32::from(index), rule, 0)
            .map_err(map_err(names::UNWIND_RULES))
    }
    fn insert_page(&mut self, key: PageKey, entry: PageEntry) -> Result<(), BpfError> {
        self.pages
            .insert(key, entry)
            .map_err(map_err(names::UNWIND_PAGES))
    }
    fn remove_page(&mut self, key: PageKey) -> Result<(), BpfError> {
        self.pages
            .remove(&key)
            .map_err(map_err(names::UNWIND_PAGES))
    }
}

/// Sends requests to the unwinder thread; cheap to clone, never blocks.
#[derive(Clone)]
pub(crate) struct UnwindHandle {
    tx: SyncSender<Request>,
    stats: Arc<Mutex<UnwindStats>>,
}

impl UnwindHandle {
    fn send(&self, request: Request) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(request) {
            self.stats
                .lock()
                .expect("unwind stats lock")
                .requests_dropped += 1;
        }
    }

    /// The process's mappings were read (first sample, exec, new code mapped).
    pub(crate) fn process_changed(&self, info: Arc<ProcessInfo>) {
        self.send(Request::Process(info));
    }

    /// The process exited: its mapping entries go.
    pub(crate) fn process_exited(&self, pid: u32) {
        self.send(Request::Exited(pid));
    }

    /// These processes were sampled in the window just drained (keeps their tables recently used).
    pub(crate) fn sampled(&self, pids: Vec<u32>) {
        self.send(Request::Sampled(pids));
    }
}

/// The running unwinder thread.
pub(crate) struct Unwinder {
    handle: UnwindHandle,
    thread: Option<JoinHandle<()>>,
}

impl Unwinder {
    /// Starts the thread over `maps`, giving binaries ids in `file_ids` as their tables load,
    /// keeping tables in `saved` when given (`sonde run`), with the own rows of the runtimes that
    /// are on (`runtimes`) for their binaries' code.
    pub(crate) fn start(
        maps: UnwindMaps,
        file_ids: FileIds,
        saved: Option<SavedTables>,
        runtimes: Runtimes,
    ) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let stats = Arc::new(Mutex::new(UnwindStats {
            budget_bytes: maps.budget_bytes,
            ..Default::default()
        }));
        let built = tx.clone();
        let builders = build::Builders::start(move |table| {
            // Fails only once the unwinder has stopped: the table is not wanted any more.
            let _ = built.send(Request::Built(table));
        });
        let mut worker = Worker {
            store: TableStore::new(
                AyaTableMaps {
                    rows: maps.rows,
                    rules: maps.rules,
                    pages: maps.pages,
                },
                maps.capacity,
            ),
            procs_map: maps.procs,
            files: Files::new(maps.files, file_ids),
            binaries: HashMap::new(),
            procs: HashMap::new(),
            unwritten: HashSet::new(),
            builders,
            building: HashMap::new(),
            barriers: Vec::new(),
            saved,
            runtimes,
            stats: stats.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("sonde-unwind".into())
            .spawn(move || worker.run(rx))
            .expect("spawning a thread");
        Self {
            handle: UnwindHandle { tx, stats },
            thread: Some(thread),
        }
    }

    /// A handle for other threads.
    pub(crate) fn handle(&self) -> UnwindHandle {
        self.handle.clone()
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> UnwindStats {
        *self.handle.stats.lock().expect("unwind stats lock")
    }

    /// Waits (at most `timeout`) until the requests sent so far are handled and no table is being
    /// built: `record --pid` loads the tables of the named processes before sampling starts.
    pub(crate) fn settle(&self, timeout: std::time::Duration) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        self.handle.send(Request::Barrier(tx));
        rx.recv_timeout(timeout).is_ok()
    }

    /// Stops the thread once the requests sent so far are handled; its final counters.
    pub(crate) fn stop(mut self) -> UnwindStats {
        let _ = self.handle.tx.send(Request::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

/// What is known of one binary's unwind information.
enum BinaryState {
    /// Buildable: its segments (the table itself may or may not be loaded).
    Usable(Vec<crate::process::Segment>),
    /// Never buildable (no CFI, another architecture, larger than the budget).
    Unusable,
}

struct Worker {
    store: TableStore<TableKey, AyaTableMaps>,
    procs_map: BpfHashMap<MapData, u32, ProcMappings>,
    files: Files<TableKey>,
    binaries: HashMap<TableKey, BinaryState>,
    procs: HashMap<u32, Arc<ProcessInfo>>,
    /// Processes whose last `PROC_MAPPINGS` write failed: written again when next sampled.
    unwritten: HashSet<u32>,
    builders: build::Builders<TableKey>,
    /// Tables being built, with the mapping that asked first (loaded and published with it).
    building: HashMap<TableKey, Mapping>,
    /// Barriers that wait for the tables being built.
    barriers: Vec<std::sync::mpsc::Sender<()>>,
    saved: Option<SavedTables>,
    runtimes: Runtimes,
    stats: Arc<Mutex<UnwindStats>>,
}

impl Worker {
    fn run(&mut self, rx: Receiver<Request>) {
        while let Ok(request) = rx.recv() {
            match request {
                Request::Process(info) => self.process(info),
                Request::Exited(pid) => self.exited(pid),
                Request::Sampled(pids) => self.sampled(&pids),
                Request::Built(built) => self.built(built),
                Request::Barrier(done) => self.barriers.push(done),
                Request::Stop => break,
            }
            if self.building.is_empty() {
                for done in self.barriers.drain(..) {
                    let _ = done.send(());
                }
            }
            let store = self.store.stats();
            let mut stats = self.stats.lock().expect("unwind stats lock");
            stats.page_capacity = u64::from(self.store.maps().pages.capacity());
            stats.table_bytes = store.blocks_used * BLOCK_BYTES
                + store.pages * PAGE_ENTRY_BYTES
                + stats.page_capacity * PAGE_BUCKET_BYTES;
            stats.pages = store.pages;
            stats.rules = store.rules;
            stats.evictions = store.evictions;
            stats.processes = self.procs.len() as u64;
        }
    }

    fn process(&mut self, info: Arc<ProcessInfo>) {
        let pid = info.pid;
        self.procs.insert(pid, info.clone());
        let keys: Vec<TableKey> = info.mappings.iter().filter_map(key_of).collect();
        let mut planned: Vec<Planned> = Vec::new();
        for (mapping, key) in info.mappings.iter().filter_map(|m| Some((m, key_of(m)?))) {
            if planned.iter().all(|p| p.key != key)
                && let Some(plan) = self.plan(key, mapping)
            {
                planned.push(plan);
            }
        }
        for plan in planned {
            match plan.source {
                Source::Saved(rows) => self.load(
                    &plan.key,
                    plan.mapping,
                    Ok(rows),
                    true,
                    Duration::ZERO,
                    &keys,
                ),
                Source::Build(runtime_rows) => {
                    let Some(binary) = plan.mapping.binary.clone() else {
                        continue;
                    };
                    self.building.insert(plan.key.clone(), plan.mapping.clone());
                    self.builders.submit(build::Job {
                        key: plan.key,
                        binary,
                        runtime_rows,
                    });
                }
            }
        }
        self.write_entries(pid);
    }

    /// A table built: loaded, and written for every process that maps its binary.
    fn built(&mut self, built: build::Built<TableKey>) {
        let Some(mapping) = self.building.remove(&built.key) else {
            return;
        };
        let rows = built.table.map(|t| {
            if let Some(binary) = &mapping.binary {
                self.keep_on_disk(&built.key, binary, &t);
            }
            t.rows
        });
        let users = self.users(std::slice::from_ref(&built.key));
        // The tables its processes use stay while it loads, as when a process's are loaded at once.
        let keep: Vec<TableKey> = users
            .iter()
            .flat_map(|p| p.mappings.iter().filter_map(key_of))
            .collect();
        let rows = rows.map_err(|e| e.to_string());
        self.load(&built.key, &mapping, rows, false, built.took, &keep);
        self.table_loaded(&mapping, &users);
    }

    fn exited(&mut self, pid: u32) {
        self.unwritten.remove(&pid);
        if self.procs.remove(&pid).is_some() {
            match self.procs_map.remove(&pid) {
                Ok(()) => {}
                Err(err) if crate::bpf::maps::key_absent(&err) => {}
                Err(err) => {
                    tracing::debug!(pid, %err, "removing the mappings of an exited process")
                }
            }
        }
    }

    /// Keeps the sampled processes' tables recently used, and reloads those evicted meanwhile.
    fn sampled(&mut self, pids: &[u32]) {
        let mut reload = Vec::new();
        for pid in pids {
            if self.unwritten.contains(pid) {
                self.write_entries(*pid);
            }
            let Some(info) = self.procs.get(pid) else {
                continue;
            };
            for key in info.mappings.iter().filter_map(key_of) {
                if self.store.get(&key).is_none()
                    && matches!(self.binaries.get(&key), Some(BinaryState::Usable(_)))
                {
                    reload.push(info.clone());
                }
            }
        }
        reload.dedup_by_key(|i| i.pid);
        for info in reload {
            self.process(info);
        }
    }

    /// Where the table of `key` comes from, unless it is loaded or known to be unusable.
    fn plan<'a>(&mut self, key: TableKey, mapping: &'a Mapping) -> Option<Planned<'a>> {
        if self.store.get(&key).is_some()
            || self.building.contains_key(&key)
            || matches!(self.binaries.get(&key), Some(BinaryState::Unusable))
        {
            return None;
        }
        let binary = mapping.binary.as_deref()?;
        // A runtime's own rows depend on which runtimes are on: such tables are built, not saved.
        let runtime_rows =
            registry::unwind_rows(binary, self.runtimes).or_else(|| table::vdso_rows(binary));
        let source = match runtime_rows {
            None => match self.saved_rows(&key, &mapping.module.path) {
                Some(rows) => Source::Saved(rows),
                None => Source::Build(None),
            },
            Some(rows) => Source::Build(Some(rows)),
        };
        Some(Planned {
            key,
            mapping,
            source,
        })
    }

    /// Saves a table just built where it may be kept (see `root_owned`), else counts it as not kept.
    fn keep_on_disk(&mut self, key: &TableKey, binary: &Binary, built: &table::BuiltTable) {
        match (key, root_owned(&binary.file), built.stats.runtime_functions) {
            (TableKey::BuildId(_), true, 0) => self.save_rows(key, &built.rows, &binary.path),
            _ => {
                self.stats
                    .lock()
                    .expect("unwind stats lock")
                    .tables_not_kept += 1
            }
        }
    }

    /// Loads the rows of `key` (read from disk, or built in `took`) into the kernel.
    fn load(
        &mut self,
        key: &TableKey,
        mapping: &Mapping,
        rows: Result<Vec<sonde_abi::UnwindRow>, String>,
        from_disk: bool,
        took: Duration,
        keep: &[TableKey],
    ) {
        let started = Instant::now();
        let built = match rows {
            Ok(rows) => rows,
            Err(reason) => {
                tracing::debug!(path = %mapping.module.path, %reason, "no unwind table; frame pointers are used there");
                self.stats.lock().expect("unwind stats lock").build_failures += 1;
                self.binaries.insert(key.clone(), BinaryState::Unusable);
                return;
            }
        };
        let Some(binary) = &mapping.binary else {
            return;
        };
        let segments = binary.elf.segments.clone();
        let rows = built.len();
        match self.store.load(key.clone(), &built, keep) {
            Ok(loaded) => {
                let elapsed = took + started.elapsed();
                tracing::debug!(path = %mapping.module.path, id = loaded.id, rows, blocks = loaded.blocks, ms = elapsed.as_millis() as u64, "unwind table loaded");
                let mut stats = self.stats.lock().expect("unwind stats lock");
                if from_disk {
                    stats.tables_from_disk += 1;
                } else {
                    stats.tables_built += 1;
                }
                stats.rows += rows as u64;
                stats.build_seconds += elapsed.as_secs_f64();
                drop(stats);
                self.binaries
                    .insert(key.clone(), BinaryState::Usable(segments));
                self.evicted(&loaded.evicted);
            }
            Err(StoreError::TooLarge {
                needed_mib,
                budget_mib,
            }) => {
                tracing::warn!(path = %mapping.module.path, needed_mib, budget_mib, "unwind table larger than --max-unwind-table-mib; frame pointers are used for this binary");
                self.stats.lock().expect("unwind stats lock").build_failures += 1;
                self.binaries.insert(key.clone(), BinaryState::Unusable);
            }
            Err(err @ (StoreError::Map(_) | StoreError::RulesFull)) => {
                tracing::warn!(path = %mapping.module.path, %err, "loading an unwind table failed");
                self.stats.lock().expect("unwind stats lock").build_failures += 1;
            }
        }
    }

    /// The rows saved on disk for `key` (a binary with a build id), counted.
    fn saved_rows(&mut self, key: &TableKey, path: &str) -> Option<Vec<sonde_abi::UnwindRow>> {
        let (TableKey::BuildId(id), Some(saved)) = (key, &mut self.saved) else {
            return None;
        };
        match saved.load(id) {
            Ok(Some(rows)) => Some(rows),
            Ok(None) => None,
            Err(err) => {
                tracing::warn!(path, %err, "a saved unwind table was not used");
                None
            }
        }
    }

    /// Saves the rows just built for `key` (a binary with a build id).
    fn save_rows(&mut self, key: &TableKey, rows: &[sonde_abi::UnwindRow], path: &str) {
        let (TableKey::BuildId(id), Some(saved)) = (key, &mut self.saved) else {
            return;
        };
        if let Err(err) = saved.save(id, rows) {
            tracing::warn!(path, %err, "saving an unwind table failed; it is rebuilt at the next start");
        }
    }
}

/// A table a process needs, and where it comes from.
struct Planned<'a> {
    key: TableKey,
    mapping: &'a Mapping,
    source: Source,
}

enum Source {
    /// Rows saved on disk by an earlier run.
    Saved(Vec<sonde_abi::UnwindRow>),
    /// To be built, with the rows its runtime gives, if any.
    Build(Option<Vec<crate::runtimes::seam::CodeRows>>),
}

/// Whether a binary is root's and writable by no one else: only such tables are kept on disk. A build
/// id is what the file says it is; a user's binary claiming libc's would otherwise have its rows
/// loaded for libc after every restart.
fn root_owned(file: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    file.metadata()
        .is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0)
}

/// The table a mapping uses, if any can exist (the vDSO is a binary like the others).
fn key_of(m: &Mapping) -> Option<TableKey> {
    let binary = m.binary.as_ref()?;
    Some(match binary.build_id() {
        Some(id) => TableKey::BuildId(id.to_owned()),
        None => TableKey::File(binary.id.0, binary.id.1),
    })
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of the kernel's `bpf_ktime_get_ns`.
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC is always available.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
