//! Symbol caches keyed by binary identity and file offset (user) or address (kernel).

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::profile::Symbol;

/// Binary identity: (device, inode).
type BinaryId = (u64, u64);
/// Inline chains by file offset within one binary.
type Offsets = HashMap<u64, Arc<[Symbol]>>;

/// Cached symbolization results; an empty chain means "looked up, not found".
#[derive(Default)]
pub(crate) struct SymbolCache {
    user: HashMap<BinaryId, Offsets>,
    kernel: HashMap<u64, Arc<[Symbol]>>,
    /// The paths blazesym read each binary's symbols from (the binary, its debug file).
    paths: HashMap<BinaryId, Vec<PathBuf>>,
    /// Binaries blazesym holds a parsed copy of, with when a lookup last needed it.
    parsed: HashMap<BinaryId, Instant>,
}

impl SymbolCache {
    /// Whether (binary, offset) was looked up already.
    pub(crate) fn has_user(&self, binary: (u64, u64), offset: u64) -> bool {
        self.user
            .get(&binary)
            .is_some_and(|m| m.contains_key(&offset))
    }
    /// Whether the kernel address was looked up already.
    pub(crate) fn has_kernel(&self, addr: u64) -> bool {
        self.kernel.contains_key(&addr)
    }
    /// Stores a user result.
    pub(crate) fn insert_user(&mut self, binary: (u64, u64), offset: u64, symbols: Arc<[Symbol]>) {
        self.user.entry(binary).or_default().insert(offset, symbols);
    }
    /// Stores a kernel result.
    pub(crate) fn insert_kernel(&mut self, addr: u64, symbols: Arc<[Symbol]>) {
        self.kernel.insert(addr, symbols);
    }
    /// The cached user result (empty when unknown).
    pub(crate) fn user(&self, binary: (u64, u64), offset: u64) -> Arc<[Symbol]> {
        self.user
            .get(&binary)
            .and_then(|m| m.get(&offset))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
    /// The cached kernel result (empty when unknown).
    pub(crate) fn kernel(&self, addr: u64) -> Arc<[Symbol]> {
        self.kernel
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
    /// Remembers a path blazesym read `binary`'s symbols from.
    pub(crate) fn note_path(&mut self, binary: BinaryId, path: PathBuf) {
        let paths = self.paths.entry(binary).or_default();
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    /// Records that blazesym parsed (or used its copy of) `binary`'s files at `at`.
    pub(crate) fn note_lookup(&mut self, binary: BinaryId, at: Instant) {
        self.parsed.insert(binary, at);
    }
    /// The blazesym paths of binaries whose parsed copy no lookup needed for `idle`: their hot
    /// addresses are cached here already, and the copy (a debug file's decompressed DWARF: 10 MB for
    /// libc's) would otherwise stay for the process's lifetime. A later miss parses them again.
    pub(crate) fn take_idle(&mut self, now: Instant, idle: Duration) -> Vec<PathBuf> {
        let mut stale = Vec::new();
        self.parsed.retain(|id, at| {
            let idle = now.saturating_duration_since(*at) >= idle;
            if idle {
                stale.push(*id);
            }
            !idle
        });
        stale
            .iter()
            .filter_map(|id| self.paths.get(id))
            .flatten()
            .cloned()
            .collect()
    }
    /// Drops the results of `binary` (it gained a debug file: they are asked again).
    pub(crate) fn forget_binary(&mut self, binary: BinaryId) {
        self.user.remove(&binary);
    }
    /// Keeps only the binaries in `live`; returns the blazesym paths of the others.
    pub(crate) fn retain_binaries(&mut self, live: &HashSet<BinaryId>) -> Vec<PathBuf> {
        self.user.retain(|id, _| live.contains(id));
        self.parsed.retain(|id, _| live.contains(id));
        let dead: Vec<BinaryId> = self
            .paths
            .keys()
            .filter(|id| !live.contains(id))
            .copied()
            .collect();
        dead.iter()
            .filter_map(|id| self.paths.remove(id))
            .flatten()
            .collect()
    }
    /// Keeps memory bounded over days of uptime: when the user or kernel side holds more than `max`
    /// entries, that side starts over (hot addresses come back within a window). Call between windows,
    /// never while a window's frames are being read from the cache.
    pub(crate) fn trim(&mut self, max: usize) {
        if self.user_entries() > max {
            self.user.clear();
        }
        if self.kernel.len() > max {
            self.kernel.clear();
        }
    }

    /// Number of cached user addresses (for self-metrics).
    pub(crate) fn user_entries(&self) -> usize {
        self.user.values().map(HashMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_parsed_copies_idle_for_the_whole_period_are_released() {
        let mut c = SymbolCache::default();
        let t0 = Instant::now();
        c.note_path((1, 1), PathBuf::from("/a"));
        c.note_path((1, 1), PathBuf::from("/a.debug"));
        c.note_path((2, 2), PathBuf::from("/b"));
        c.note_lookup((1, 1), t0);
        c.note_lookup((2, 2), t0 + Duration::from_secs(20));
        let idle = Duration::from_secs(30);
        assert!(c.take_idle(t0 + Duration::from_secs(29), idle).is_empty());
        assert_eq!(
            c.take_idle(t0 + Duration::from_secs(30), idle),
            vec![PathBuf::from("/a"), PathBuf::from("/a.debug")]
        );
        // Released once: a second pass finds nothing until a lookup parses it again.
        assert!(c.take_idle(t0 + Duration::from_secs(45), idle).is_empty());
        c.note_lookup((1, 1), t0 + Duration::from_secs(46));
        let mut both = c.take_idle(t0 + Duration::from_secs(80), idle);
        both.sort();
        assert_eq!(both, ["/a", "/a.debug", "/b"].map(PathBuf::from).to_vec());
    }

    #[test]
    fn trim_bounds_each_side_and_keeps_small_ones() {
        let mut c = SymbolCache::default();
        let sym: Arc<[Symbol]> = Arc::from(vec![Symbol {
            name: "f".into(),
            file: None,
            line: None,
        }]);
        for i in 0..10 {
            c.insert_user((1, 1), i, sym.clone());
        }
        c.insert_kernel(0xffff, sym.clone());
        c.trim(10);
        assert!(
            c.has_user((1, 1), 3) && c.has_kernel(0xffff),
            "at the bound nothing is dropped"
        );
        c.insert_user((2, 2), 0, sym.clone());
        c.trim(10);
        assert_eq!(
            c.user_entries(),
            0,
            "over the bound the user side starts over"
        );
        assert!(
            c.has_kernel(0xffff),
            "the kernel side is bounded on its own"
        );
    }
}
