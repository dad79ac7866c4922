//! Symbol caches keyed by binary identity and file offset (user) or address (kernel).

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::Arc,
};

use crate::profile::Symbol;

/// Binary identity: (device, inode).
type BinaryId = (u64, u64);
/// Inline chains by file offset within one binary.
type Offsets = HashMap<u64, Arc<[Symbol]>>;

/// Cached symbolization results; an empty chain means "looked up, not found".
#[derive(Default)]
pub struct SymbolCache {
    user: HashMap<BinaryId, Offsets>,
    kernel: HashMap<u64, Arc<[Symbol]>>,
    paths: HashMap<BinaryId, PathBuf>,
}

impl SymbolCache {
    /// Whether (binary, offset) was looked up already.
    pub fn has_user(&self, binary: (u64, u64), offset: u64) -> bool {
        self.user
            .get(&binary)
            .is_some_and(|m| m.contains_key(&offset))
    }
    /// Whether the kernel address was looked up already.
    pub fn has_kernel(&self, addr: u64) -> bool {
        self.kernel.contains_key(&addr)
    }
    /// Stores a user result.
    pub fn insert_user(&mut self, binary: (u64, u64), offset: u64, symbols: Arc<[Symbol]>) {
        self.user.entry(binary).or_default().insert(offset, symbols);
    }
    /// Stores a kernel result.
    pub fn insert_kernel(&mut self, addr: u64, symbols: Arc<[Symbol]>) {
        self.kernel.insert(addr, symbols);
    }
    /// The cached user result (empty when unknown).
    pub fn user(&self, binary: (u64, u64), offset: u64) -> Arc<[Symbol]> {
        self.user
            .get(&binary)
            .and_then(|m| m.get(&offset))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
    /// The cached kernel result (empty when unknown).
    pub fn kernel(&self, addr: u64) -> Arc<[Symbol]> {
        self.kernel
            .get(&addr)
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
    /// Remembers the path blazesym knows `binary` by.
    pub fn note_path(&mut self, binary: BinaryId, path: PathBuf) {
        self.paths.insert(binary, path);
    }
    /// Keeps only the binaries in `live`; returns the blazesym paths of the others.
    pub fn retain_binaries(&mut self, live: &HashSet<BinaryId>) -> Vec<PathBuf> {
        self.user.retain(|id, _| live.contains(id));
        let dead: Vec<BinaryId> = self
            .paths
            .keys()
            .filter(|id| !live.contains(id))
            .copied()
            .collect();
        dead.iter().filter_map(|id| self.paths.remove(id)).collect()
    }
    /// Number of cached user addresses (for self-metrics).
    pub fn user_entries(&self) -> usize {
        self.user.values().map(HashMap::len).sum()
    }
}
