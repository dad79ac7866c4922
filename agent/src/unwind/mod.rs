//! User-stack unwinding without frame pointers. For every binary a sampled process maps, the unwind
//! table is built from its `.eh_frame` (or `.debug_frame`) call frame information (`table`), cut into
//! pages packed into blocks (`layout`), loaded into kernel maps within a memory budget with LRU
//! eviction (`store`), and each process's executable mappings are described to the kernel with their
//! table and load bias (`mappings`). All of it runs on its own thread (`worker`); the kernel programs
//! walk the stacks with these tables (agent-ebpf `unwind`).

mod build;
mod files;
pub mod inspect;
mod layout;
pub(crate) mod mappings;
pub(crate) mod saved;
mod store;
pub(crate) mod table;
mod worker;

pub use crate::bpf::unwind_maps::UnwindMode;
pub(crate) use worker::{UnwindHandle, Unwinder};

/// Counters of the unwind tables, cumulative except where noted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnwindStats {
    /// Tables built (from `.eh_frame`) and loaded.
    pub tables_built: u64,
    /// Tables read from disk and loaded (`sonde run` keeps built tables in its data directory).
    pub tables_from_disk: u64,
    /// Tables built that are not kept on disk: their binary is not root's alone (the vDSO's memfd) or
    /// has no build id, so every start builds them again.
    pub tables_not_kept: u64,
    /// Binaries without a usable table (no CFI, another architecture, larger than the budget).
    pub build_failures: u64,
    /// Rows of the tables built.
    pub rows: u64,
    /// Time spent building and loading tables.
    pub build_seconds: f64,
    /// Tables evicted to stay within the budget.
    pub evictions: u64,
    /// Kernel bytes of the tables loaded now: their rows, page entries and the page hash's buckets.
    pub table_bytes: u64,
    /// Page entries in the kernel now.
    pub pages: u64,
    /// Page entries the kernel's page hash holds before it is replaced by a larger one.
    pub page_capacity: u64,
    /// Distinct rules in the kernel now (shared by all tables).
    pub rules: u64,
    /// The budget (`--max-unwind-table-mib`), bytes.
    pub budget_bytes: u64,
    /// Processes with mapping entries now.
    pub processes: u64,
    /// Executable mappings beyond the kernel's per-process limit (left to frame pointers).
    pub mappings_dropped: u64,
    /// Processes whose entries could not be written (map full).
    pub processes_dropped: u64,
    /// Requests dropped because the unwinder's queue was full.
    pub requests_dropped: u64,
}
