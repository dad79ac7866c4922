//! User-stack unwinding without frame pointers. For every binary a sampled process maps, the unwind
//! table is built from its `.eh_frame` (or `.debug_frame`) call frame information (`table`), cut into
//! pages packed into blocks (`layout`), loaded into kernel maps within a memory budget with LRU
//! eviction (`store`), and each process's executable mappings are described to the kernel with their
//! table and load bias (`mappings`). All of it runs on its own thread (`worker`); the kernel programs
//! walk the stacks with these tables (agent-ebpf `unwind`).

pub mod inspect;
mod layout;
pub(crate) mod mappings;
pub(crate) mod saved;
mod store;
pub(crate) mod table;
mod worker;

pub use crate::bpf::unwind_maps::UnwindMode;
pub(crate) use worker::{UnwindHandle, Unwinder};

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
    /// Runtimes whose frames are named beyond native symbols, comma-separated, or `all` or `none`:
    /// `python` (CPython 3.9 to 3.13: function, file and line in place of the interpreter's
    /// evaluation loop), `go` (names, lines and inlined calls from `.gopclntab`, stripped binaries
    /// too).
    #[arg(long, default_value = "all")]
    pub runtimes: crate::runtimes::Runtimes,
    /// Shorthand kept from before `--runtimes`: `off` takes `python` out of `--runtimes`, `on` puts
    /// it in.
    #[arg(long, value_enum)]
    pub python: Option<Switch>,
}

impl UnwindArgs {
    /// The runtimes that are on, `--python` applied to `--runtimes`.
    pub fn runtimes(&self) -> crate::runtimes::Runtimes {
        match self.python {
            Some(switch) => self
                .runtimes
                .with(crate::runtimes::Runtime::Python, switch.on()),
            None => self.runtimes,
        }
    }
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
    /// Tables built (from `.eh_frame`) and loaded.
    pub tables_built: u64,
    /// Tables read from disk and loaded (`sonde run` keeps built tables in its data directory).
    pub tables_from_disk: u64,
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
