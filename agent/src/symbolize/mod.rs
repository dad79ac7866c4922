//! Turns drained kernel stacks into symbolized [`StackSample`]s with blazesym.
//!
//! User frames: address -> the process's captured mapping -> file offset -> symbols of the binary, or
//! of its separate debug file (`debuginfo`: debug links, build-id directories, MiniDebugInfo,
//! debuginfod) -> names demangled, inlined frames, file and line. JIT code: the process's perf map.
//! Runtime frames (stored by the kernel in place among the native frames, or appended after them)
//! and native code a runtime describes better than ELF symbols: named by the runtimes' namers
//! (`crate::runtimes::seam::RuntimeNames`, listed by `crate::runtimes::registry`), none by name here.
//! Kernel frames: the kernel's own symbol lookup through BPF (`crate::bpf::kernel_names`), or
//! kallsyms without it. Results are cached per (binary device+inode, file offset) and per kernel
//! address, so a stack seen again costs hash lookups. A frame that cannot be symbolized is kept with
//! its module, address and build id, counted, and its binary is listed with the reason.

mod cache;
pub(crate) mod debuginfo;
mod kallsyms;
mod lookup;
pub(crate) mod offenders;
pub(crate) mod perfmap;
mod roots;
mod sources;
#[cfg(test)]
pub(crate) mod test_support;
mod unmapped;
mod user;
mod words;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

pub(crate) use crate::bpf::kernel_names::NameKernel;
pub(crate) use cache::SymbolCache;
pub(crate) use debuginfo::{DebugInfoStats, Reason};
pub(crate) use offenders::Offender;
pub(crate) use perfmap::PerfMapStats;
pub(crate) use unmapped::UnmappedFrames;

use sonde_abi::unwind::unpack_file_frame;
use words::{file_offset, lookup_address, user_lookup_address};

use self::{
    debuginfo::{DebugInfo, Resolved},
    lookup::Lookup,
    offenders::Offenders,
    perfmap::PerfMaps,
    sources::Sources,
};
use crate::{
    bpf::drain::{RawSample, RawStack},
    process::{Binary, JIT_PATH, ProcessInfo, file_ids::FileIds},
    profile::{Frame, FrameKind, Module, ProfileKind, StackSample, Symbol},
    runtimes::{
        Runtime, RuntimeStats, Runtimes,
        registry::{self, RuntimeCaches},
        seam::RuntimeNames,
        stack_words::native_words,
    },
};

/// Symbolization counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SymbolizeStats {
    /// Frames emitted, weighted by sample count (markers excluded).
    pub frames: u64,
    /// Of those, frames with a function name.
    pub symbolized: u64,
    /// Stacks (weighted) whose user part did not reach a thread entry point.
    pub truncated: u64,
    /// Stacks (weighted) with a user part.
    pub with_user_stack: u64,
    /// blazesym calls that failed outright (their frames stay unsymbolized).
    pub errors: u64,
    /// `[unmapped]` frames (weighted), by why no file holds them.
    pub unmapped: UnmappedFrames,
}

/// Cached addresses per side (user, kernel) before that side starts over: a few tens of MiB at most.
const MAX_CACHED_ADDRESSES: usize = 200_000;
/// How long blazesym keeps a binary's parsed copy after the last lookup that needed it. A re-parse
/// costs tens of milliseconds (libc's debug file: its DWARF decompressed, 10 MB), so at most one a
/// minute per binary whose misses keep coming, while a binary whose hot addresses are all cached
/// gives its memory back.
const PARSED_IDLE: Duration = Duration::from_secs(60);

/// The symbolizer with its caches.
pub(crate) struct Symbolizer {
    lookup: Lookup,
    cache: SymbolCache,
    sources: Sources,
    perf_maps: PerfMaps,
    /// What the runtimes read of processes, shared with their captures (on the process-event
    /// thread), which read the code the kernel announces while it lives.
    caches: RuntimeCaches,
    /// The runtimes that are on, each naming its own frames.
    runtimes: Vec<Box<dyn RuntimeNames>>,
    /// Each runtime's frames (stacks, frames, unreadable, stale, corrupt words, dropped).
    runtime_frames: RuntimeStats,
    /// Binaries of file-relative frames (shared with the unwinder, which gives the ids).
    files: FileIds,
    offenders: Offenders,
    kernel_module: Arc<Module>,
    stats: SymbolizeStats,
}

impl Symbolizer {
    /// A symbolizer with empty caches, finding debug files with `debug` and naming the frames of
    /// `runtimes`. With `wait` (`record`'s one window), pending debuginfod fetches are waited for up
    /// to that long before symbolizing.
    pub(crate) fn new(debug: DebugInfo, wait: Option<Duration>, runtimes: Runtimes) -> Self {
        let caches = RuntimeCaches::default();
        let kernel_module = Arc::new(Module {
            path: "[kernel.kallsyms]".into(),
            build_id: None,
            start: 0,
            limit: u64::MAX,
            file_offset: 0,
        });
        Self {
            lookup: Lookup::new(),
            cache: SymbolCache::default(),
            sources: Sources::new(debug, wait),
            perf_maps: PerfMaps::default(),
            runtimes: registry::namers(runtimes, &caches),
            runtime_frames: RuntimeStats::default(),
            caches,
            files: FileIds::default(),
            offenders: Offenders::default(),
            kernel_module,
            stats: SymbolizeStats::default(),
        }
    }

    /// Names kernel frames with `namer` from now on (kallsyms if it ever fails).
    pub(crate) fn name_kernel_with(&mut self, namer: Box<dyn NameKernel>) {
        self.lookup.kernel_names = Some(namer);
    }

    /// The runtimes' frame caches, for their captures to fill as the kernel announces code.
    pub(crate) fn name_caches(&self) -> RuntimeCaches {
        self.caches.clone()
    }

    /// The ids of binaries in file-relative frames, for the unwinder to give.
    pub(crate) fn file_ids(&self) -> FileIds {
        self.files.clone()
    }

    /// Counters so far.
    pub(crate) fn stats(&self) -> SymbolizeStats {
        SymbolizeStats {
            errors: self.lookup.errors,
            ..self.stats
        }
    }

    /// `runtime`'s frame counters so far (tests).
    #[cfg(test)]
    pub(crate) fn frames_of(&self, runtime: Runtime) -> crate::runtimes::counts::RuntimeFrameStats {
        self.runtime_frames.of(runtime).frames
    }

    /// Sets each runtime's frames and tables so far in `stats`.
    pub(crate) fn runtime_names(&self, stats: &mut RuntimeStats) {
        for runtime in Runtime::ALL {
            stats.of_mut(runtime).frames = self.runtime_frames.of(runtime).frames;
        }
        for namer in &self.runtimes {
            stats.of_mut(namer.runtime()).tables = namer.tables();
        }
    }

    /// Debug file discovery and debuginfod counters so far.
    pub(crate) fn debug_stats(&self) -> DebugInfoStats {
        self.sources.stats()
    }

    /// Perf map counters so far.
    pub(crate) fn perf_map_stats(&self) -> PerfMapStats {
        self.perf_maps.stats()
    }

    /// The `n` binaries with the most samples having unnamed frames since the last call, and why.
    pub(crate) fn take_offenders(&mut self, n: usize) -> Vec<Offender> {
        self.offenders.take_top(n)
    }

    /// Drops cached symbols, debug files and blazesym's parsed copies of binaries no longer mapped by
    /// any known process, and perf maps of processes gone, so memory tracks the live processes.
    pub(crate) fn retain(&mut self, live: &HashSet<(u64, u64)>, live_pids: &HashSet<u32>) {
        for path in self.cache.retain_binaries(live) {
            self.lookup.evict(path);
        }
        self.sources.retain(live);
        self.perf_maps.retain(live_pids);
        for namer in &mut self.runtimes {
            namer.retain(live, live_pids);
        }
    }

    /// Symbolizes `samples` of `kind`, whose processes are `infos` (None: gone before captured).
    pub(crate) fn symbolize(
        &mut self,
        kind: ProfileKind,
        samples: &[RawSample],
        infos: &HashMap<u32, Option<Arc<ProcessInfo>>>,
        period: i64,
    ) -> Vec<StackSample> {
        self.cache.trim(MAX_CACHED_ADDRESSES);
        for namer in &mut self.runtimes {
            namer.trim();
        }
        self.refresh_sources(samples, infos);
        self.resolve_missing(samples, infos);
        self.release_idle_parses();
        samples
            .iter()
            .map(|s| {
                let info = infos.get(&s.key.tgid).and_then(Option::as_ref);
                self.sample(kind, s, info.map(Arc::as_ref), period)
            })
            .collect()
    }

    /// Brings the symbol sources of the binaries in `samples` up to date (a debug file may have
    /// arrived), and the perf maps of processes with frames in JIT code.
    fn refresh_sources(
        &mut self,
        samples: &[RawSample],
        infos: &HashMap<u32, Option<Arc<ProcessInfo>>>,
    ) {
        let mut binaries: HashMap<(u64, u64), Arc<Binary>> = HashMap::new();
        let mut jit_pids: HashSet<u32> = HashSet::new();
        for s in samples {
            let RawStack::Frames(ips) = &s.user else {
                continue;
            };
            for (file, _) in self.file_frames(ips) {
                binaries
                    .entry(file.binary.id)
                    .or_insert_with(|| file.binary.clone());
            }
            let Some(Some(info)) = infos.get(&s.key.tgid) else {
                continue;
            };
            for (i, ip) in native_words(ips) {
                if unpack_file_frame(ip).is_some() {
                    continue;
                }
                let Some(m) = info.mapping_for(user_lookup_address(ip, i)) else {
                    continue;
                };
                match &m.binary {
                    Some(b) => {
                        binaries.entry(b.id).or_insert_with(|| b.clone());
                    }
                    None if m.module.path == JIT_PATH => {
                        jit_pids.insert(s.key.tgid);
                    }
                    None => {}
                }
            }
        }
        let binaries: Vec<Arc<Binary>> = binaries.into_values().collect();
        for id in self.sources.update(&binaries) {
            self.cache.forget_binary(id);
        }
        for pid in jit_pids {
            self.perf_maps.refresh(pid);
        }
    }

    fn release_idle_parses(&mut self) {
        let idle = self.cache.take_idle(Instant::now(), PARSED_IDLE);
        if idle.is_empty() {
            return;
        }
        // The memory goes back to the kernel at the window's end (`Sampler::window`).
        for path in idle {
            self.lookup.evict(path);
        }
    }

    /// Fills the caches for every frame of `samples` not cached yet, one blazesym call per binary.
    fn resolve_missing(
        &mut self,
        samples: &[RawSample],
        infos: &HashMap<u32, Option<Arc<ProcessInfo>>>,
    ) {
        let mut per_binary: HashMap<(u64, u64), (Arc<Binary>, Vec<u64>)> = HashMap::new();
        let mut kernel: Vec<u64> = Vec::new();
        for s in samples {
            if let RawStack::Frames(ips) = &s.user {
                for (file, offset) in self.file_frames(ips) {
                    if !self.cache.has_user(file.binary.id, offset) {
                        per_binary
                            .entry(file.binary.id)
                            .or_insert_with(|| (file.binary.clone(), Vec::new()))
                            .1
                            .push(offset);
                    }
                }
            }
            if let (RawStack::Frames(ips), Some(Some(info))) = (&s.user, infos.get(&s.key.tgid)) {
                for namer in &self.runtimes {
                    namer.resolve(info, ips);
                }
                for (i, ip) in native_words(ips) {
                    if unpack_file_frame(ip).is_some() {
                        continue;
                    }
                    let addr = user_lookup_address(ip, i);
                    let Some(m) = info.mapping_for(addr) else {
                        continue;
                    };
                    let Some(binary) = &m.binary else { continue };
                    let offset = file_offset(&m.module, addr);
                    if !self.cache.has_user(binary.id, offset) {
                        per_binary
                            .entry(binary.id)
                            .or_insert_with(|| (binary.clone(), Vec::new()))
                            .1
                            .push(offset);
                    }
                }
            }
            if let RawStack::Frames(ips) = &s.kernel {
                kernel.extend(
                    ips.iter()
                        .enumerate()
                        .map(|(i, &ip)| lookup_address(ip, i))
                        .filter(|a| !self.cache.has_kernel(*a)),
                );
            }
        }
        let now = Instant::now();
        for (id, (binary, mut offsets)) in per_binary {
            offsets.sort_unstable();
            offsets.dedup();
            let source = self.sources.get(id);
            self.cache.note_lookup(id, now);
            self.cache.note_path(id, binary.open_path());
            if let Some(Resolved::Debug(debug)) = source {
                self.cache.note_path(id, debug.open_path());
            }
            let by_runtime = self
                .runtimes
                .iter_mut()
                .find_map(|namer| namer.native_chains(&binary, &offsets));
            let chains = match by_runtime {
                // A runtime's own table names its code (Go's, inlined calls included); ELF symbols
                // name what it does not cover (C linked in with cgo).
                Some(mut chains) => {
                    let rest: Vec<usize> = (0..offsets.len())
                        .filter(|&i| chains[i].is_empty())
                        .collect();
                    if !rest.is_empty() {
                        let rest_offsets: Vec<u64> = rest.iter().map(|&i| offsets[i]).collect();
                        let found = self.lookup.user(&binary, source, &rest_offsets);
                        for (i, chain) in rest.into_iter().zip(found) {
                            chains[i] = chain;
                        }
                    }
                    chains
                }
                None => self.lookup.user(&binary, source, &offsets),
            };
            for (offset, chain) in offsets.into_iter().zip(chains) {
                self.cache.insert_user(id, offset, chain);
            }
        }
        kernel.sort_unstable();
        kernel.dedup();
        if !kernel.is_empty() {
            let chains = self.lookup.kernel(&kernel);
            for (addr, chain) in kernel.into_iter().zip(chains) {
                self.cache.insert_kernel(addr, chain);
            }
        }
    }

    fn sample(
        &mut self,
        kind: ProfileKind,
        s: &RawSample,
        info: Option<&ProcessInfo>,
        period: i64,
    ) -> StackSample {
        let mut frames = Vec::new();
        self.push_kernel(&s.kernel, &mut frames);
        let user_start = frames.len();
        let mut unnamed = Vec::new();
        let tallies = self.push_user(s, info, &mut frames, &mut unnamed);
        let weight = s.count;
        for runtime in Runtime::ALL {
            let frames = &mut self.runtime_frames.of_mut(runtime).frames;
            tallies[runtime as usize].add_to(frames, weight);
        }
        // Per frame, before the offenders' list folds them into one entry per sample.
        self.stats.unmapped.add(&unnamed, weight);
        self.offenders.add_sample(&mut unnamed, weight);
        let user = &frames[user_start..];
        // Complete when the kernel's walk reached a thread root, or (frame-pointer walks cannot tell)
        // when the outermost frame is a known thread entry point.
        let truncated = match &s.user {
            RawStack::Frames(_) => {
                s.user_outcome != sonde_abi::unwind::outcome::ROOT
                    && !sonde_abi::unwind::outcome::has_no_stack(s.user_outcome)
                    && !roots::is_root(user.last(), &self.runtimes)
            }
            _ => false,
        };
        if matches!(s.user, RawStack::Frames(_)) {
            self.stats.with_user_stack += weight;
            self.stats.truncated += weight * u64::from(truncated);
        }
        let real = frames.iter().filter(|f| f.kind != FrameKind::Marker);
        let (n, named) = real.fold((0u64, 0u64), |(n, k), f| {
            (n + 1, k + u64::from(f.function().is_some()))
        });
        self.stats.frames += n * weight;
        self.stats.symbolized += named * weight;
        let values = match kind {
            ProfileKind::Cpu => vec![s.count as i64, s.count as i64 * period],
            // Each tracked episode stands for `weight` (its inverse probability): unbiased totals.
            ProfileKind::OffCpu => {
                let weight = i64::from(s.key.weight.max(1));
                vec![
                    (s.total_ns as i64).saturating_mul(weight),
                    (s.count as i64).saturating_mul(weight),
                    s.count as i64,
                ]
            }
        };
        StackSample {
            pid: s.key.tgid,
            tid: s.key.tid,
            comm: comm(&s.key.comm),
            frames,
            values,
            truncated,
            labels: s.labels.clone(),
        }
    }

    fn push_kernel(&self, stack: &RawStack, frames: &mut Vec<Frame>) {
        match stack {
            RawStack::Frames(ips) => frames.extend(ips.iter().enumerate().map(|(i, &ip)| Frame {
                address: ip,
                kind: FrameKind::Kernel,
                return_address: lookup_address(ip, i) != ip,
                module: Some(self.kernel_module.clone()),
                symbols: self.cache.kernel(lookup_address(ip, i)),
            })),
            other => frames.extend(marker(other, "kernel")),
        }
    }
}

fn comm(raw: &[u8; sonde_abi::TASK_COMM_LEN]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// A frame standing for a stack that could not be collected, so its samples stay visible.
fn marker(stack: &RawStack, which: &str) -> Option<Frame> {
    let name = match stack {
        RawStack::Frames(_) | RawStack::None => return None,
        RawStack::Collision => format!("[{which} stack lost: stack map collision]"),
        RawStack::Stale => format!("[{which} stack unavailable: blocked longer than a window]"),
        RawStack::Missing => format!("[{which} stack missing from map]"),
        RawStack::MapFull => format!("[{which} stack lost: stack map full]"),
        RawStack::Error(errno) => format!("[{which} stack error {errno}]"),
    };
    Some(Frame {
        address: 0,
        kind: FrameKind::Marker,
        return_address: false,
        module: None,
        symbols: Arc::from(vec![Symbol {
            name,
            file: None,
            line: None,
        }]),
    })
}
