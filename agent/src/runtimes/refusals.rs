//! What a runtime's capture refuses: each process counted as unsupported once (until it is
//! evicted), and each binary's refusal said at warn once, then at debug.

use std::collections::HashSet;

use super::ProcessCounts;

/// The refusals of one runtime's capture.
#[derive(Default)]
pub(crate) struct Refusals {
    /// Processes counted as unsupported.
    processes: HashSet<u32>,
    /// Binaries whose refusal was warned about.
    binaries: HashSet<String>,
}

impl Refusals {
    /// Counts `pid` as unsupported (once), and says `message` about `binary`: at warn the first
    /// time, at debug after.
    pub(crate) fn refuse(
        &mut self,
        pid: u32,
        binary: &str,
        counts: &mut ProcessCounts,
        message: &str,
    ) {
        if self.processes.insert(pid) {
            counts.unsupported += 1;
        }
        match self.binaries.insert(binary.to_owned()) {
            true => tracing::warn!("{message}"),
            false => tracing::debug!("{message}"),
        }
    }

    /// `pid` is forgotten: a process reusing its id is counted anew.
    pub(crate) fn evicted(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_counts_once_until_evicted() {
        let mut refusals = Refusals::default();
        let mut counts = ProcessCounts::default();
        refusals.refuse(7, "/usr/lib/libruby.so", &mut counts, "no");
        refusals.refuse(7, "/usr/lib/libruby.so", &mut counts, "no");
        refusals.refuse(8, "/usr/lib/libruby.so", &mut counts, "no");
        assert_eq!(counts.unsupported, 2);
        refusals.evicted(7);
        refusals.refuse(7, "/usr/lib/libruby.so", &mut counts, "no");
        assert_eq!(counts.unsupported, 3);
    }
}
