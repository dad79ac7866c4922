//! What each binary is symbolized from, kept across windows: decided when the binary is first seen,
//! asked again each window while debuginfod may still answer. When a binary gains a debug file, its
//! cached (nameless) frames are dropped so the next window names them.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use super::debuginfo::{DebugInfo, DebugInfoStats, Reason, Resolved};
use crate::process::Binary;

/// Binary identity: (device, inode).
type BinaryId = (u64, u64);

/// How often a waiting `record` asks again.
const POLL: Duration = Duration::from_millis(50);

pub(crate) struct Sources {
    debug: DebugInfo,
    by_binary: HashMap<BinaryId, Resolved>,
    /// `record`: wait up to this long for pending fetches before symbolizing its one window.
    wait: Option<Duration>,
}

impl Sources {
    pub(super) fn new(debug: DebugInfo, wait: Option<Duration>) -> Self {
        Self {
            debug,
            by_binary: HashMap::new(),
            wait,
        }
    }

    pub(super) fn get(&self, id: BinaryId) -> Option<&Resolved> {
        self.by_binary.get(&id)
    }

    pub(super) fn stats(&self) -> DebugInfoStats {
        self.debug.stats()
    }

    /// Resolves binaries seen for the first time and asks again for those debuginfod may still
    /// answer. Returns the binaries that gained a debug file (their cached results are stale).
    pub(super) fn update(&mut self, binaries: &[Arc<Binary>]) -> Vec<BinaryId> {
        let mut gained = Vec::new();
        for binary in binaries {
            match self.by_binary.get(&binary.id) {
                None => {
                    let resolved = self.debug.resolve(binary);
                    self.by_binary.insert(binary.id, resolved);
                }
                Some(Resolved::Missing(reason)) if reason.asks_debuginfod() => {
                    self.poll(binary, &mut gained);
                }
                Some(_) => {}
            }
        }
        if let Some(wait) = self.wait {
            let deadline = Instant::now() + wait;
            let pending = |s: &Self| {
                binaries.iter().any(|b| {
                    matches!(
                        s.by_binary.get(&b.id),
                        Some(Resolved::Missing(Reason::DebuginfodPending))
                    )
                })
            };
            while pending(self) && Instant::now() < deadline {
                std::thread::sleep(POLL);
                for binary in binaries {
                    if let Some(Resolved::Missing(Reason::DebuginfodPending)) =
                        self.by_binary.get(&binary.id)
                    {
                        self.poll(binary, &mut gained);
                    }
                }
            }
        }
        gained
    }

    fn poll(&mut self, binary: &Binary, gained: &mut Vec<BinaryId>) {
        if let Some(resolved) = self.debug.poll(binary) {
            if matches!(resolved, Resolved::Debug(_)) {
                gained.push(binary.id);
            }
            self.by_binary.insert(binary.id, resolved);
        }
    }

    /// Forgets binaries not in `live` (closing their debug files).
    pub(super) fn retain(&mut self, live: &HashSet<BinaryId>) {
        self.by_binary.retain(|id, _| live.contains(id));
    }
}
