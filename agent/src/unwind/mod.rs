//! User-stack unwinding without frame pointers. For every binary a sampled process maps, the unwind
//! table is built from its `.eh_frame` (or `.debug_frame`) call frame information (`table`), cut into
//! pages packed into blocks (`layout`), loaded into kernel maps within a memory budget with LRU
//! eviction (`store`), and each process's executable mappings are described to the kernel with their
//! table and load bias (`mappings`). All of it runs on its own thread (`worker`); the kernel programs
//! walk the stacks with these tables (agent-ebpf `unwind`).

pub mod inspect;
mod layout;
pub(crate) mod mappings;
mod store;
pub(crate) mod table;
mod worker;

pub(crate) use store::{PAGES_PER_BLOCK, blocks_for_budget};
pub(crate) use worker::{UnwindHandle, UnwindMaps, Unwinder};

/// How user stacks are walked (`--unwind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum UnwindMode {
    /// Unwind tables where they exist, frame pointers elsewhere.
    #[default]
    Auto,
    /// Frame pointers only.
    Fp,
    /// Unwind tables only: a frame without one ends the stack.
    Tables,
}

impl UnwindMode {
    /// The kernel's value (`sonde_abi::unwind::mode`).
    pub(crate) fn abi(self) -> u32 {
        use sonde_abi::unwind::mode;
        match self {
            UnwindMode::Auto => mode::AUTO,
            UnwindMode::Fp => mode::FP,
            UnwindMode::Tables => mode::TABLES,
        }
    }
}

/// Unwinding flags shared by `record` and `run`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct UnwindArgs {
    /// How user stacks are walked: `auto` uses unwind tables built from each binary's `.eh_frame`
    /// where they exist and frame pointers elsewhere; `fp` frame pointers only; `tables` tables only.
    #[arg(long, value_enum, default_value = "auto")]
    pub unwind: UnwindMode,
    /// Kernel memory for unwind tables, MiB (allocated at start; least recently used tables are
    /// evicted beyond it).
    #[arg(long, default_value_t = crate::bpf::loader::DEFAULT_UNWIND_TABLE_MIB,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_unwind_table_mib: u32,
    /// Python frames of CPython 3.9 to 3.13 processes (function, file and line in place of the
    /// interpreter's evaluation loop): `on` or `off`.
    #[arg(long, value_enum, default_value = "on")]
    pub python: Switch,
}

/// An on/off flag value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl Switch {
    /// Whether it is on.
    pub fn on(self) -> bool {
        self == Self::On
    }
}

/// Counters of the unwind tables, cumulative except where noted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnwindStats {
    /// Tables built and loaded.
    pub tables_built: u64,
    /// Binaries without a usable table (no CFI, another architecture, larger than the budget).
    pub build_failures: u64,
    /// Rows of the tables built.
    pub rows: u64,
    /// Time spent building and loading tables.
    pub build_seconds: f64,
    /// Tables evicted to stay within the budget.
    pub evictions: u64,
    /// Kernel bytes of the tables loaded now: their rows and page entries.
    pub table_bytes: u64,
    /// Page entries in the kernel now.
    pub pages: u64,
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
