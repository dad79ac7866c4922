//! The kernel maps of unwind tables as the loader sizes and hands them to the unwinder: how many blocks
//! of rows a memory budget buys, and the map handles themselves. Below `unwind`, which fills them.

use aya::maps::{Array, ArrayOfMaps, HashMap as BpfHashMap, MapData, MapError};

use crate::platform::kernel::Programs;
use sonde_abi::{
    FileKey, FileTable, PackedRow, PageEntry, PageKey, ProcMappings, RowBlock, UnwindRule,
    unwind::{MAX_RULES, ROW_CHUNK_BLOCKS, ROWS_PER_BLOCK},
};

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

/// Bytes of one block of rows.
pub(crate) const BLOCK_BYTES: u64 = (ROWS_PER_BLOCK * size_of::<PackedRow>()) as u64;
/// Kernel bytes of one page entry: a non-preallocated hash element with an 8-byte key and value is
/// a 64-byte slab object.
pub(crate) const PAGE_ENTRY_BYTES: u64 = 64;
/// Kernel bytes of one hash bucket of `UNWIND_PAGES`, allocated for every entry the hash may hold.
pub(crate) const PAGE_BUCKET_BYTES: u64 = 16;
/// Page entries allowed per block of rows: 4 KiB of code holds about 80 rows on average, so about 100
/// pages fill an 8192-row block (libc 98, python3 88, libLLVM 103); 128 leaves room for sparse tables.
pub(crate) const PAGES_PER_BLOCK: u32 = 128;
/// Linux's `BPF_F_NO_PREALLOC` (uapi `bpf.h`): the flag the page hash's template carries in the
/// full kernel object, which every hash put in its place must carry too. The legacy object's is
/// preallocated (Linux 5.10 to 6.0 refuse others in perf_event programs), flags 0.
const BPF_F_NO_PREALLOC: u32 = 1;
/// Page entries the first page hash holds (16 KiB of buckets): the tables of a few processes.
const FIRST_PAGE_ENTRIES: u32 = 1024;
/// Bytes of the rule array, allocated in full at load.
pub(crate) const RULES_BYTES: u64 = (MAX_RULES * size_of::<UnwindRule>()) as u64;

/// Blocks of rows for a budget of `bytes` of kernel memory covering everything the tables use: the
/// rules, and per block its rows, its share of page entries and of the page hash's buckets.
pub(crate) fn blocks_for_budget(bytes: u64) -> u32 {
    let per_block =
        BLOCK_BYTES + u64::from(PAGES_PER_BLOCK) * (PAGE_ENTRY_BYTES + PAGE_BUCKET_BYTES);
    (bytes.saturating_sub(RULES_BYTES) / per_block).max(1) as u32
}

/// Chunks of `UNWIND_ROWS` that `blocks` blocks of rows take: the size of its outer array.
pub(crate) fn chunks_for_blocks(blocks: u32) -> u32 {
    blocks.div_ceil(ROW_CHUNK_BLOCKS).max(1)
}

/// `UNWIND_ROWS`: blocks of rows in chunks of `ROW_CHUNK_BLOCKS`, each an array created when one of its
/// blocks is first written, so the kernel holds the chunks the tables use rather than the whole budget.
pub(crate) struct RowChunks {
    outer: ArrayOfMaps<MapData, Array<MapData, RowBlock>>,
    chunks: Vec<Option<Array<MapData, RowBlock>>>,
}

impl RowChunks {
    pub(crate) fn new(outer: ArrayOfMaps<MapData, Array<MapData, RowBlock>>) -> Self {
        let chunks = (0..outer.len()).map(|_| None).collect();
        Self { outer, chunks }
    }

    /// Writes block `index`, creating its chunk first if it has none yet.
    pub(crate) fn write(&mut self, index: u32, block: &RowBlock) -> Result<(), MapError> {
        let (chunk, at) = (index / ROW_CHUNK_BLOCKS, index % ROW_CHUNK_BLOCKS);
        let max_entries = self.chunks.len() as u32;
        let slot = self
            .chunks
            .get_mut(chunk as usize)
            .ok_or(MapError::OutOfBounds {
                index: chunk,
                max_entries,
            })?;
        let inner = match slot {
            Some(inner) => inner,
            None => {
                let inner = super::inner_maps::array::<RowBlock>(ROW_CHUNK_BLOCKS)?;
                self.outer.set(chunk, &inner, 0)?;
                slot.insert(inner)
            }
        };
        inner.set(at, block, 0)
    }
}

/// `UNWIND_PAGES`: the page hash behind a one-slot outer array. A hash's buckets are allocated for
/// every entry it may hold, so it starts at [`FIRST_PAGE_ENTRIES`] and, when full, is replaced by a
/// copy four times larger (up to `limit`, what the budget's blocks may use), written in full before
/// the outer slot points at it: a walk reads the old hash or the new, both complete. The entries are
/// kept here too (16 bytes each), so a copy is only inserts: read back from the kernel, a key and a
/// value each, the copy of 4,096 entries took 22 ms, while the tables being loaded wait on it.
pub(crate) struct PageHash {
    outer: ArrayOfMaps<MapData, BpfHashMap<MapData, PageKey, PageEntry>>,
    inner: BpfHashMap<MapData, PageKey, PageEntry>,
    entries: std::collections::HashMap<PageKey, PageEntry>,
    capacity: u32,
    limit: u32,
    /// The template's flags.
    flags: u32,
}

impl PageHash {
    /// Creates the first hash and puts it in `outer`; later ones are never larger than `limit`.
    pub(crate) fn new(
        mut outer: ArrayOfMaps<MapData, BpfHashMap<MapData, PageKey, PageEntry>>,
        limit: u32,
        programs: Programs,
    ) -> Result<Self, MapError> {
        let capacity = FIRST_PAGE_ENTRIES.min(limit).max(1);
        let flags = match programs {
            Programs::Full => BPF_F_NO_PREALLOC,
            Programs::Legacy => 0,
        };
        let inner = super::inner_maps::hash(capacity, flags)?;
        outer.set(0, &inner, 0)?;
        Ok(Self {
            outer,
            inner,
            entries: std::collections::HashMap::new(),
            capacity,
            limit,
            flags,
        })
    }

    /// Adds the entry of a page not in the hash yet (a table's ids are never reused), growing the
    /// hash first when it is full.
    pub(crate) fn insert(&mut self, key: PageKey, entry: PageEntry) -> Result<(), MapError> {
        if self.entries.len() >= self.capacity as usize && self.capacity < self.limit {
            self.grow(self.capacity.saturating_mul(4).min(self.limit))?;
        }
        self.inner.insert(key, entry, 0)?;
        self.entries.insert(key, entry);
        Ok(())
    }

    /// Removes a page's entry; one already gone is not an error.
    pub(crate) fn remove(&mut self, key: &PageKey) -> Result<(), MapError> {
        self.entries.remove(key);
        match self.inner.remove(key) {
            Ok(()) => Ok(()),
            Err(err) if super::maps::key_absent(&err) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Entries the current hash holds before it is replaced.
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    fn grow(&mut self, capacity: u32) -> Result<(), MapError> {
        let mut bigger = super::inner_maps::hash(capacity, self.flags)?;
        for (key, entry) in &self.entries {
            bigger.insert(key, entry, 0)?;
        }
        self.outer.set(0, &bigger, 0)?;
        // The old hash is freed once the last walk holding it returns.
        self.inner = bigger;
        self.capacity = capacity;
        tracing::debug!(
            capacity,
            entries = self.entries.len(),
            "unwind page hash grown"
        );
        Ok(())
    }
}

/// The kernel maps the unwinder owns.
pub(crate) struct UnwindMaps {
    /// `UNWIND_ROWS`.
    pub(crate) rows: RowChunks,
    /// `UNWIND_RULES`.
    pub(crate) rules: Array<MapData, UnwindRule>,
    /// `UNWIND_PAGES`.
    pub(crate) pages: PageHash,
    /// `PROC_MAPPINGS`.
    pub(crate) procs: BpfHashMap<MapData, u32, ProcMappings>,
    /// `FILE_TABLES`.
    pub(crate) files: BpfHashMap<MapData, FileKey, FileTable>,
    /// Blocks in `rows`.
    pub(crate) capacity: u32,
    /// `--max-unwind-table-mib`, in bytes.
    pub(crate) budget_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_array_holds_a_chunk_for_every_block_of_the_budget() {
        assert_eq!(chunks_for_blocks(1), 1);
        assert_eq!(chunks_for_blocks(ROW_CHUNK_BLOCKS), 1);
        assert_eq!(chunks_for_blocks(ROW_CHUNK_BLOCKS + 1), 2);
        // The default 64 MiB budget: every block it buys has its chunk.
        let blocks = blocks_for_budget(64 << 20);
        assert!(chunks_for_blocks(blocks) * ROW_CHUNK_BLOCKS >= blocks);
        assert!((chunks_for_blocks(blocks) - 1) * ROW_CHUNK_BLOCKS < blocks);
    }
}
