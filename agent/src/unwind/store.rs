//! The kernel side of the unwind tables: which blocks of `UNWIND_ROWS` hold which table, the page
//! entries that point into them, the distinct rules all tables share (`UNWIND_RULES`, never removed:
//! a few thousand at most), and a least-recently-used eviction that keeps the rows within the
//! `--max-unwind-table-mib` budget (the row array is allocated at that size).
//!
//! Ids are never reused, so a page entry of an evicted table can never be read as another table's.
//! Blocks freed by an eviction are only reused after [`REUSE_GRACE`], so a program invocation that
//! found a page entry just before its removal never reads rows of another table.

use std::{
    collections::{HashMap, VecDeque},
    time::{Duration, Instant},
};

use sonde_abi::{
    PackedRow, PageEntry, PageKey, RowBlock, UnwindRow, UnwindRule,
    unwind::{MAX_RULES, ROWS_PER_BLOCK},
};

use super::layout::{Layout, RulesFull, layout};
use crate::bpf::{BpfError, unwind_maps::BLOCK_BYTES};

/// Time before a freed block is written again: program invocations last microseconds.
const REUSE_GRACE: Duration = Duration::from_millis(50);

/// The kernel maps behind the store (a fake in tests).
pub(crate) trait TableMaps {
    /// Writes block `index` of the row array.
    fn write_block(&mut self, index: u32, block: &RowBlock) -> Result<(), BpfError>;
    /// Writes rule `index` of the rule array.
    fn write_rule(&mut self, index: u16, rule: UnwindRule) -> Result<(), BpfError>;
    /// Adds or replaces a page entry.
    fn insert_page(&mut self, key: PageKey, entry: PageEntry) -> Result<(), BpfError>;
    /// Removes a page entry.
    fn remove_page(&mut self, key: PageKey) -> Result<(), BpfError>;
}

/// Why a table could not be loaded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// Larger than the rows the whole budget holds.
    #[error(
        "its unwind table needs {needed_mib:.1} MiB of rows, more than the {budget_mib:.1} MiB of rows --max-unwind-table-mib leaves: raise the flag to unwind it"
    )]
    TooLarge {
        /// Size of the table's blocks.
        needed_mib: f64,
        /// The budget.
        budget_mib: f64,
    },
    /// Every rule index is taken (65536 distinct rules: never seen in practice).
    #[error("the kernel's table of distinct unwind rules is full ({MAX_RULES})")]
    RulesFull,
    /// A map write failed.
    #[error(transparent)]
    Map(#[from] BpfError),
}

impl From<RulesFull> for StoreError {
    fn from(_: RulesFull) -> Self {
        StoreError::RulesFull
    }
}

/// Counters of the store, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StoreStats {
    /// Tables loaded.
    pub(crate) loaded: u64,
    /// Tables evicted to make room.
    pub(crate) evictions: u64,
    /// Blocks in use (including those waiting out the reuse grace).
    pub(crate) blocks_used: u64,
    /// Page entries in the kernel.
    pub(crate) pages: u64,
    /// Distinct rules in the kernel.
    pub(crate) rules: u64,
}

/// A table just loaded.
pub(crate) struct LoadedTable<K> {
    /// Its id.
    pub(crate) id: u32,
    /// Tables evicted to make room.
    pub(crate) evicted: Vec<K>,
    /// Blocks it takes.
    pub(crate) blocks: usize,
}

struct Loaded {
    id: u32,
    blocks: Vec<u32>,
    pages: Vec<u32>,
    last_used: u64,
}

/// Tables in the kernel, by a key chosen by the caller (the binary's identity).
pub(crate) struct TableStore<K, M> {
    maps: M,
    capacity: u32,
    free: Vec<u32>,
    cooling: VecDeque<(Instant, Vec<u32>)>,
    tables: HashMap<K, Loaded>,
    rules: HashMap<UnwindRule, u16>,
    next_id: u32,
    clock: u64,
    stats: StoreStats,
}

impl<K: std::hash::Hash + Eq + Clone, M: TableMaps> TableStore<K, M> {
    /// A store over `capacity` blocks of `maps`.
    pub(crate) fn new(maps: M, capacity: u32) -> Self {
        Self {
            maps,
            capacity,
            free: (0..capacity).rev().collect(),
            cooling: VecDeque::new(),
            tables: HashMap::new(),
            rules: HashMap::new(),
            next_id: 1,
            clock: 0,
            stats: StoreStats::default(),
        }
    }

    /// Counters.
    pub(crate) fn stats(&self) -> StoreStats {
        self.stats
    }

    /// The kernel maps behind it.
    pub(crate) fn maps(&self) -> &M {
        &self.maps
    }

    /// The id of the loaded table `key`, marking it used.
    pub(crate) fn get(&mut self, key: &K) -> Option<u32> {
        self.clock += 1;
        let t = self.tables.get_mut(key)?;
        t.last_used = self.clock;
        Some(t.id)
    }

    /// The index of `rule`, written to the kernel the first time it is seen.
    fn intern(
        rules: &mut HashMap<UnwindRule, u16>,
        maps: &mut M,
        rule: UnwindRule,
        failed: &mut Option<BpfError>,
    ) -> Option<u16> {
        if let Some(index) = rules.get(&rule) {
            return Some(*index);
        }
        let index = u16::try_from(rules.len()).ok()?;
        if let Err(err) = maps.write_rule(index, rule) {
            failed.get_or_insert(err);
            return None;
        }
        rules.insert(rule, index);
        Some(index)
    }

    /// The index of `rule` among the kernel's shared rules, written there the first time; None when
    /// it cannot be written.
    pub(crate) fn rule_index(&mut self, rule: UnwindRule) -> Option<u16> {
        let mut failed = None;
        let index = Self::intern(&mut self.rules, &mut self.maps, rule, &mut failed);
        self.stats.rules = self.rules.len() as u64;
        index
    }

    /// Loads the table of `rows` as `key`, evicting the least recently used tables (never one of
    /// `keep`) when the budget is short.
    pub(crate) fn load(
        &mut self,
        key: K,
        rows: &[UnwindRow],
        keep: &[K],
    ) -> Result<LoadedTable<K>, StoreError> {
        let mut failed = None;
        let (rules, maps) = (&mut self.rules, &mut self.maps);
        let laid_out = layout(rows, &mut |rule| {
            Self::intern(rules, maps, rule, &mut failed)
        });
        self.stats.rules = self.rules.len() as u64;
        if let Some(err) = failed {
            return Err(err.into());
        }
        let laid_out = laid_out?;
        let (id, evicted) = self.place(key, &laid_out, keep)?;
        Ok(LoadedTable {
            id,
            evicted,
            blocks: laid_out.blocks.len(),
        })
    }

    fn place(&mut self, key: K, layout: &Layout, keep: &[K]) -> Result<(u32, Vec<K>), StoreError> {
        let needed = layout.blocks.len() as u32;
        if needed > self.capacity {
            return Err(StoreError::TooLarge {
                needed_mib: f64::from(needed) * BLOCK_BYTES as f64 / 1048576.0,
                budget_mib: f64::from(self.capacity) * BLOCK_BYTES as f64 / 1048576.0,
            });
        }
        let mut evicted = Vec::new();
        self.reclaim(false);
        let cooling =
            |c: &VecDeque<(Instant, Vec<u32>)>| c.iter().map(|(_, b)| b.len()).sum::<usize>();
        while self.free.len() + cooling(&self.cooling) < needed as usize {
            let Some(victim) = self
                .tables
                .iter()
                .filter(|(k, _)| !keep.contains(k))
                .min_by_key(|(_, t)| t.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.evict(&victim)?;
            evicted.push(victim);
        }
        if (self.free.len() as u32) < needed {
            // Blocks just freed may still be read by a program that found their page a moment ago.
            self.reclaim(true);
        }
        if (self.free.len() as u32) < needed {
            // Everything else is pinned by `keep`: treat as too large for what is left.
            return Err(StoreError::TooLarge {
                needed_mib: f64::from(needed) * BLOCK_BYTES as f64 / 1048576.0,
                budget_mib: self.free.len() as f64 * BLOCK_BYTES as f64 / 1048576.0,
            });
        }
        let blocks: Vec<u32> = (0..needed).filter_map(|_| self.free.pop()).collect();
        let id = self.next_id;
        self.next_id += 1;
        let mut image = Box::new(RowBlock {
            rows: [PackedRow::default(); ROWS_PER_BLOCK],
        });
        let mut pages = Vec::with_capacity(layout.pages.len());
        let result = (|| {
            for (rows, &index) in layout.blocks.iter().zip(&blocks) {
                image.rows[..rows.len()].copy_from_slice(rows);
                self.maps.write_block(index, &image)?;
            }
            // Pages last: the kernel only finds rows once they are all written.
            for p in &layout.pages {
                let entry = PageEntry {
                    block: blocks[p.block],
                    first: p.first,
                    count: p.count,
                };
                self.maps.insert_page(
                    PageKey {
                        table_id: id,
                        page: p.page,
                    },
                    entry,
                )?;
                pages.push(p.page);
            }
            Ok::<(), BpfError>(())
        })();
        self.clock += 1;
        let loaded = Loaded {
            id,
            blocks,
            pages,
            last_used: self.clock,
        };
        match result {
            Ok(()) => {
                self.stats.blocks_used += u64::from(needed);
                self.stats.pages += loaded.pages.len() as u64;
                self.stats.loaded += 1;
                self.tables.insert(key, loaded);
                Ok((id, evicted))
            }
            Err(err) => {
                // Undo what was written; the blocks cool down like an eviction's.
                for page in &loaded.pages {
                    let _ = self.maps.remove_page(PageKey {
                        table_id: id,
                        page: *page,
                    });
                }
                self.cooling.push_back((Instant::now(), loaded.blocks));
                Err(err.into())
            }
        }
    }

    /// Removes table `key` from the kernel; its blocks become reusable after the grace period.
    pub(crate) fn evict(&mut self, key: &K) -> Result<(), BpfError> {
        let Some(t) = self.tables.remove(key) else {
            return Ok(());
        };
        for page in &t.pages {
            self.maps.remove_page(PageKey {
                table_id: t.id,
                page: *page,
            })?;
        }
        self.stats.evictions += 1;
        self.stats.pages -= t.pages.len() as u64;
        self.stats.blocks_used -= t.blocks.len() as u64;
        self.cooling.push_back((Instant::now(), t.blocks));
        Ok(())
    }

    /// Returns cooled-down blocks to the free list; `wait` sleeps out the grace of the oldest batch.
    fn reclaim(&mut self, wait: bool) {
        while let Some((at, _)) = self.cooling.front() {
            let left = REUSE_GRACE.saturating_sub(at.elapsed());
            if !left.is_zero() {
                if !wait {
                    return;
                }
                std::thread::sleep(left);
            }
            if let Some((_, blocks)) = self.cooling.pop_front() {
                self.free.extend(blocks);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    #[test]
    fn the_budget_covers_rows_page_entries_buckets_and_rules() {
        let budget = 64u64 << 20;
        let blocks = u64::from(blocks_for_budget(budget));
        let used = RULES_BYTES
            + blocks * BLOCK_BYTES
            + blocks * u64::from(PAGES_PER_BLOCK) * (PAGE_ENTRY_BYTES + PAGE_BUCKET_BYTES);
        assert!(used <= budget, "{used} > {budget}");
        // Most of it goes to rows.
        assert!(blocks * BLOCK_BYTES > budget * 3 / 4, "{blocks} blocks");
        assert_eq!(blocks_for_budget(1), 1, "at least one block");
    }

    use sonde_abi::unwind::cfa;

    use super::*;
    use crate::bpf::unwind_maps::{
        PAGE_BUCKET_BYTES, PAGE_ENTRY_BYTES, PAGES_PER_BLOCK, RULES_BYTES, blocks_for_budget,
    };

    #[derive(Default)]
    struct FakeMaps {
        blocks: BTreeMap<u32, Vec<PackedRow>>,
        rules: BTreeMap<u16, UnwindRule>,
        pages: BTreeMap<(u32, u32), PageEntry>,
    }

    impl TableMaps for FakeMaps {
        fn write_block(&mut self, index: u32, block: &RowBlock) -> Result<(), BpfError> {
            self.blocks.insert(index, block.rows.to_vec());
            Ok(())
        }
        fn write_rule(&mut self, index: u16, rule: UnwindRule) -> Result<(), BpfError> {
            self.rules.insert(index, rule);
            Ok(())
        }
        fn insert_page(&mut self, key: PageKey, entry: PageEntry) -> Result<(), BpfError> {
            self.pages.insert((key.table_id, key.page), entry);
            Ok(())
        }
        fn remove_page(&mut self, key: PageKey) -> Result<(), BpfError> {
            self.pages.remove(&(key.table_id, key.page));
            Ok(())
        }
    }

    /// Rows filling `blocks` blocks exactly (one full 4 KiB page of rows twice per block).
    fn table(blocks: u32, tag: u16) -> Vec<UnwindRow> {
        (0..blocks * 8192)
            .map(|i| UnwindRow {
                pc: i,
                cfa_offset: tag,
                rbp_offset: 0,
                kind: cfa::RSP,
            })
            .collect()
    }

    /// What the kernel finds at `pc` in table `id`.
    fn rule_at(store: &TableStore<&str, FakeMaps>, id: u32, pc: u32) -> Option<UnwindRule> {
        let e = store.maps.pages.get(&(id, pc >> 12))?;
        let rows = &store.maps.blocks[&e.block];
        let low = (pc & 0xfff) as u16;
        let row = rows[e.first as usize..(e.first + e.count) as usize]
            .iter()
            .rev()
            .find(|r| r.pc_low <= low)?;
        store.maps.rules.get(&row.rule).copied()
    }

    #[test]
    fn loads_tables_and_finds_their_rules() {
        let mut store = TableStore::new(FakeMaps::default(), 4);
        let a = store.load("a", &table(1, 8), &[]).unwrap().id;
        let b = store.load("b", &table(2, 16), &[]).unwrap();
        assert_ne!(a, b.id);
        assert_eq!(b.blocks, 2);
        assert_eq!(rule_at(&store, a, 100).unwrap().cfa_offset, 8);
        assert_eq!(rule_at(&store, b.id, 5000).unwrap().cfa_offset, 16);
        assert_eq!(store.stats().blocks_used, 3);
        // Two distinct rules, each written once.
        assert_eq!((store.stats().rules, store.maps.rules.len()), (2, 2));
        assert_eq!(store.get(&"a"), Some(a));
    }

    #[test]
    fn evicts_the_least_recently_used_but_never_a_kept_one() {
        let mut store = TableStore::new(FakeMaps::default(), 4);
        let a = store.load("a", &table(2, 8), &[]).unwrap().id;
        store.load("b", &table(2, 16), &[]).unwrap();
        store.get(&"a"); // b is now the least recently used
        let c = store.load("c", &table(2, 24), &[]).unwrap();
        assert_eq!(c.evicted, vec!["b"]);
        assert!(store.get(&"b").is_none());
        assert_eq!(rule_at(&store, a, 10).unwrap().cfa_offset, 8);
        assert_eq!(rule_at(&store, c.id, 10).unwrap().cfa_offset, 24);
        assert_eq!(store.stats().evictions, 1);
        // "a" is older now, but kept: "c" goes instead.
        let d = store.load("d", &table(2, 32), &["a"]).unwrap();
        assert_eq!(d.evicted, vec!["c"]);
        // No page of an evicted table is left behind.
        assert!(
            store
                .maps
                .pages
                .keys()
                .all(|(id, _)| *id == a || *id == d.id)
        );
    }

    #[test]
    fn a_table_larger_than_the_budget_is_refused_without_evicting() {
        let mut store = TableStore::new(FakeMaps::default(), 2);
        store.load("a", &table(1, 8), &[]).unwrap();
        let err = store.load("big", &table(3, 8), &[]).err().unwrap();
        assert!(err.to_string().contains("--max-unwind-table-mib"), "{err}");
        assert!(store.get(&"a").is_some());
        assert_eq!(store.stats().evictions, 0);
    }
}
