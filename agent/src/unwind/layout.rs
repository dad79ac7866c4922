//! How a table's rows are laid out in the kernel: cut into 4 KiB pages of table addresses, each page's
//! rows packed whole into one block of `ROWS_PER_BLOCK` rows. Every page starts with the row in effect at
//! its first address, so the kernel's binary search within a page never needs the page before.

use sonde_abi::{
    UnwindRow,
    unwind::{PAGE_SHIFT, ROWS_PER_BLOCK, cfa},
};

/// One page's place in the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PagePlace {
    /// `table_pc >> PAGE_SHIFT`.
    pub(crate) page: u32,
    /// Index into [`Layout::blocks`].
    pub(crate) block: usize,
    /// First row of the page in its block.
    pub(crate) first: u16,
    /// Rows of the page.
    pub(crate) count: u16,
}

/// A table cut into pages and packed into blocks, ready to be written to the kernel.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Blocks of rows, each at most `ROWS_PER_BLOCK` long.
    pub(crate) blocks: Vec<Vec<UnwindRow>>,
    /// Every page with at least one rule other than "no information".
    pub(crate) pages: Vec<PagePlace>,
}

/// Lays out `rows` (sorted by pc, as the table builder makes them).
pub(crate) fn layout(rows: &[UnwindRow]) -> Layout {
    let mut out = Layout::default();
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return out;
    };
    let mut next = 0usize; // first row with pc > the current page start
    for page in first.pc >> PAGE_SHIFT..=last.pc >> PAGE_SHIFT {
        let start = page << PAGE_SHIFT;
        let end = u64::from(start) + (1 << PAGE_SHIFT);
        while next < rows.len() && rows[next].pc <= start {
            next += 1;
        }
        // The rule in effect at the page's first address (none before the first row).
        let carried = next.checked_sub(1).map(|i| UnwindRow {
            pc: start,
            ..rows[i]
        });
        let inside = rows[next..]
            .iter()
            .take_while(|r| u64::from(r.pc) < end)
            .count();
        let mut page_rows = Vec::with_capacity(inside + 1);
        page_rows.push(carried.unwrap_or(UnwindRow {
            pc: start,
            kind: cfa::NO_INFO,
            ..Default::default()
        }));
        page_rows.extend_from_slice(&rows[next..next + inside]);
        next += inside;
        if page_rows.iter().all(|r| r.cfa_rule() == cfa::NO_INFO) {
            continue; // a page in a gap: no entry means "no information" to the kernel
        }
        place(&mut out, page, page_rows);
    }
    out
}

fn place(out: &mut Layout, page: u32, rows: Vec<UnwindRow>) {
    // At most one row per byte of a 4 KiB page: a page always fits in a block.
    debug_assert!(rows.len() <= ROWS_PER_BLOCK);
    let fits = out
        .blocks
        .last()
        .is_some_and(|b| b.len() + rows.len() <= ROWS_PER_BLOCK);
    if !fits {
        out.blocks.push(Vec::with_capacity(ROWS_PER_BLOCK));
    }
    let block = out.blocks.len() - 1;
    let b = &mut out.blocks[block];
    out.pages.push(PagePlace {
        page,
        block,
        first: b.len() as u16,
        count: rows.len() as u16,
    });
    b.extend(rows);
}

#[cfg(test)]
mod tests {
    use sonde_abi::unwind::rbp;

    use super::*;

    fn row(pc: u32, rule: u8, offset: u16) -> UnwindRow {
        UnwindRow {
            pc,
            cfa_offset: offset,
            rbp_offset: 0,
            kind: rule | rbp::SAME,
        }
    }

    /// The row in effect at `pc` as the kernel finds it: page entry, then the last row <= pc.
    fn lookup(l: &Layout, pc: u32) -> Option<UnwindRow> {
        let p = l.pages.iter().find(|p| p.page == pc >> PAGE_SHIFT)?;
        let rows = &l.blocks[p.block][p.first as usize..(p.first + p.count) as usize];
        assert_eq!(
            rows[0].pc,
            p.page << PAGE_SHIFT,
            "a page starts at its first address"
        );
        rows.iter().rev().find(|r| r.pc <= pc).copied()
    }

    #[test]
    fn every_address_finds_the_rule_in_effect_and_gaps_have_no_page() {
        let rows = vec![
            row(0x1010, cfa::RSP, 8),
            row(0x1011, cfa::RSP, 16),
            row(0x1ff0, cfa::RBP, 16), // spans into the next page
            row(0x2100, cfa::NO_INFO, 0),
            row(0x5000, cfa::RSP, 8), // after two empty pages
            row(0x5040, cfa::NO_INFO, 0),
        ];
        let l = layout(&rows);
        assert_eq!(lookup(&l, 0x1010).unwrap().cfa_offset, 8);
        assert_eq!(lookup(&l, 0x1500).unwrap().cfa_offset, 16);
        let carried = lookup(&l, 0x2000).unwrap();
        assert_eq!((carried.cfa_rule(), carried.pc), (cfa::RBP, 0x2000));
        assert_eq!(lookup(&l, 0x20ff).unwrap().cfa_rule(), cfa::RBP);
        assert_eq!(lookup(&l, 0x2100).unwrap().cfa_rule(), cfa::NO_INFO);
        assert_eq!(lookup(&l, 0x1000).unwrap().cfa_rule(), cfa::NO_INFO);
        assert!(l.pages.iter().all(|p| p.page != 3 && p.page != 4));
        assert_eq!(lookup(&l, 0x5020).unwrap().cfa_offset, 8);
        assert_eq!(l.pages.len(), 3);
    }

    #[test]
    fn pages_never_straddle_blocks() {
        // 3 pages of 3000 rows each: the second cannot share the first block.
        let rows: Vec<UnwindRow> = (0..3u32)
            .flat_map(|p| {
                (0..3000u32).map(move |i| row(p * 4096 + i, cfa::RSP, (i % 7) as u16 * 8))
            })
            .collect();
        let l = layout(&rows);
        assert_eq!(l.blocks.len(), 3);
        for p in &l.pages {
            assert!(p.first as usize + p.count as usize <= l.blocks[p.block].len());
        }
        assert!(l.blocks.iter().all(|b| b.len() <= ROWS_PER_BLOCK));
        assert_eq!(
            lookup(&l, 2 * 4096 + 2999).unwrap().cfa_offset,
            (2999 % 7) * 8
        );
    }
}
