//! Turns drained kernel stacks into symbolized [`StackSample`]s with blazesym.
//!
//! User frames: address -> the process's captured mapping -> file offset -> ELF symbols and DWARF (names
//! demangled, inlined frames, file and line). Kernel frames: kallsyms. Results are cached per
//! (binary device+inode, file offset) and per kernel address, so a stack seen again costs hash lookups.
//! A frame that cannot be symbolized is kept with its module and address and counted.

mod cache;
mod roots;

use std::{collections::HashMap, sync::Arc};

use blazesym::symbolize::{
    Symbolizer as Blaze,
    source::{Elf, Kernel, Source},
};

pub use cache::SymbolCache;

use sonde_abi::unwind::FRAME_EXACT;

use crate::{
    bpf::drain::{RawSample, RawStack},
    process::{ProcessInfo, ProcessTable},
    profile::{Frame, FrameKind, Module, ProfileKind, StackSample, Symbol},
};

/// Symbolization counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SymbolizeStats {
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
}

impl SymbolizeStats {
    /// Symbolized frames / frames.
    pub fn symbolized_ratio(&self) -> f64 {
        ratio(self.symbolized, self.frames)
    }
    /// Truncated user stacks / user stacks.
    pub fn truncated_ratio(&self) -> f64 {
        ratio(self.truncated, self.with_user_stack)
    }
}

/// Cached addresses per side (user, kernel) before that side starts over: a few tens of MiB at most.
const MAX_CACHED_ADDRESSES: usize = 200_000;

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The symbolizer with its caches.
pub struct Symbolizer {
    blaze: Blaze,
    cache: SymbolCache,
    kernel_module: Arc<Module>,
    /// Counters.
    pub stats: SymbolizeStats,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    /// A symbolizer with empty caches.
    pub fn new() -> Self {
        let blaze = Blaze::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .build();
        let kernel_module = Arc::new(Module {
            path: "[kernel.kallsyms]".into(),
            build_id: None,
            start: 0,
            limit: u64::MAX,
            file_offset: 0,
        });
        Self {
            blaze,
            cache: SymbolCache::default(),
            kernel_module,
            stats: SymbolizeStats::default(),
        }
    }

    /// Drops cached symbols, and blazesym's parsed copy, of binaries no longer mapped by any known
    /// process, so memory tracks the live processes over hours.
    pub fn retain_binaries(&mut self, live: &std::collections::HashSet<(u64, u64)>) {
        for path in self.cache.retain_binaries(live) {
            let evict =
                blazesym::symbolize::evict::Evict::Elf(blazesym::symbolize::evict::Elf::new(path));
            if let Err(err) = self.blaze.evict(&evict) {
                tracing::debug!(%err, "evicting a symbolizer cache entry failed");
            }
        }
    }

    /// Symbolizes `samples` of `kind`. Processes not yet captured are captured now if still alive.
    pub fn symbolize(
        &mut self,
        kind: ProfileKind,
        samples: &[RawSample],
        procs: &mut ProcessTable,
        period: i64,
    ) -> Vec<StackSample> {
        let infos: HashMap<u32, Option<Arc<ProcessInfo>>> = samples
            .iter()
            .map(|s| s.key.tgid)
            .map(|pid| (pid, procs.ensure(pid)))
            .collect();
        self.cache.trim(MAX_CACHED_ADDRESSES);
        self.resolve_missing(samples, &infos);
        samples
            .iter()
            .map(|s| {
                let info = infos.get(&s.key.tgid).and_then(Option::as_ref);
                self.sample(kind, s, info.map(Arc::as_ref), period)
            })
            .collect()
    }

    /// Fills the caches for every frame of `samples` not cached yet, one blazesym call per binary.
    fn resolve_missing(
        &mut self,
        samples: &[RawSample],
        infos: &HashMap<u32, Option<Arc<ProcessInfo>>>,
    ) {
        let mut per_binary: HashMap<(u64, u64), (Arc<crate::process::Binary>, Vec<u64>)> =
            HashMap::new();
        let mut kernel: Vec<u64> = Vec::new();
        for s in samples {
            if let (RawStack::Frames(ips), Some(Some(info))) = (&s.user, infos.get(&s.key.tgid)) {
                for (i, &ip) in ips.iter().enumerate() {
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
        for (id, (binary, mut offsets)) in per_binary {
            offsets.sort_unstable();
            offsets.dedup();
            self.cache.note_path(id, binary.open_path());
            let src = Source::Elf(Elf::new(binary.open_path()));
            match self
                .blaze
                .symbolize(&src, blazesym::symbolize::Input::FileOffset(&offsets))
            {
                Ok(results) => {
                    for (offset, r) in offsets.iter().zip(results) {
                        self.cache.insert_user(id, *offset, convert(&r));
                    }
                }
                Err(err) => {
                    tracing::debug!(path = %binary.path, %err, "symbolization failed");
                    self.stats.errors += 1;
                    for offset in offsets {
                        self.cache.insert_user(id, offset, Arc::from(Vec::new()));
                    }
                }
            }
        }
        kernel.sort_unstable();
        kernel.dedup();
        if !kernel.is_empty() {
            let src = Source::Kernel(Kernel {
                vmlinux: blazesym::MaybeDefault::None,
                debug_syms: false,
                ..Default::default()
            });
            match self
                .blaze
                .symbolize(&src, blazesym::symbolize::Input::AbsAddr(&kernel))
            {
                Ok(results) => {
                    for (addr, r) in kernel.iter().zip(results) {
                        self.cache.insert_kernel(*addr, convert(&r));
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, "kernel symbolization failed; is /proc/kallsyms readable?");
                    self.stats.errors += 1;
                    for addr in kernel {
                        self.cache.insert_kernel(addr, Arc::from(Vec::new()));
                    }
                }
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
        self.push_user(&s.user, info, &mut frames);
        let user = &frames[user_start..];
        // Complete when the kernel's walk reached a thread root, or (frame-pointer walks cannot tell)
        // when the outermost frame is a known thread entry point.
        let truncated = match &s.user {
            RawStack::Frames(_) => {
                s.user_outcome != sonde_abi::unwind::outcome::ROOT && !roots::is_root(user.last())
            }
            _ => false,
        };
        let weight = s.count;
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
            comm: comm(&s.key.comm),
            frames,
            values,
            truncated,
        }
    }

    fn push_kernel(&self, stack: &RawStack, frames: &mut Vec<Frame>) {
        match stack {
            RawStack::Frames(ips) => frames.extend(ips.iter().enumerate().map(|(i, &ip)| Frame {
                address: ip,
                kind: FrameKind::Kernel,
                module: Some(self.kernel_module.clone()),
                symbols: self.cache.kernel(lookup_address(ip, i)),
            })),
            other => frames.extend(marker(other, "kernel")),
        }
    }

    fn push_user(&self, stack: &RawStack, info: Option<&ProcessInfo>, frames: &mut Vec<Frame>) {
        let RawStack::Frames(ips) = stack else {
            frames.extend(marker(stack, "user"));
            return;
        };
        for (i, &ip) in ips.iter().enumerate() {
            let addr = user_lookup_address(ip, i);
            let mapping = info.and_then(|p| p.mapping_for(addr));
            let symbols = mapping
                .and_then(|m| {
                    m.binary
                        .as_ref()
                        .map(|b| self.cache.user(b.id, file_offset(&m.module, addr)))
                })
                .unwrap_or_else(|| Arc::from(Vec::new()));
            frames.push(Frame {
                address: ip & !FRAME_EXACT,
                kind: FrameKind::User,
                module: mapping.map(|m| m.module.clone()),
                symbols,
            });
        }
    }
}

/// Return addresses point after the call; look up the call itself so the caller's line is right.
fn lookup_address(ip: u64, depth: usize) -> u64 {
    if depth == 0 { ip } else { ip.saturating_sub(1) }
}

/// As [`lookup_address`] for a user frame, which the kernel marks when it is an exact instruction
/// address (the leaf, a signal trampoline, the instruction a signal interrupted).
fn user_lookup_address(ip: u64, depth: usize) -> u64 {
    if ip & FRAME_EXACT != 0 {
        ip & !FRAME_EXACT
    } else {
        lookup_address(ip, depth)
    }
}

fn file_offset(module: &Module, addr: u64) -> u64 {
    addr - module.start + module.file_offset
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
        module: None,
        symbols: Arc::from(vec![Symbol {
            name,
            file: None,
            line: None,
        }]),
    })
}

/// blazesym result -> inline chain, innermost first, containing function last.
fn convert(r: &blazesym::symbolize::Symbolized<'_>) -> Arc<[Symbol]> {
    let blazesym::symbolize::Symbolized::Sym(sym) = r else {
        return Arc::from(Vec::new());
    };
    // Past the end of the nearest symbol (e.g. a PLT stub after `_init`): not really in it.
    if sym.size.is_some_and(|size| sym.offset >= size) {
        return Arc::from(Vec::new());
    }
    let file_line = |ci: Option<&blazesym::symbolize::CodeInfo<'_>>| {
        (
            ci.map(|c| c.to_path().display().to_string()),
            ci.and_then(|c| c.line),
        )
    };
    // blazesym lists the containing function, then inlined functions outer to inner, each with its own
    // position (the innermost holds the address's position); pprof wants innermost first.
    let outer = std::iter::once((sym.name.as_ref(), file_line(sym.code_info.as_deref())));
    let inlined = sym
        .inlined
        .iter()
        .map(|f| (f.name.as_ref(), file_line(f.code_info.as_ref())));
    let mut chain: Vec<Symbol> = outer
        .chain(inlined)
        .map(|(name, (file, line))| Symbol {
            name: name.to_owned(),
            file,
            line,
        })
        .collect();
    chain.reverse();
    Arc::from(chain)
}
