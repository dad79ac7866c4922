//! How a table's rows are laid out in the kernel: cut into 4 KiB pages of table addresses, each page's
//! rows packed whole into one block of `ROWS_PER_BLOCK` rows. Every page starts with the row in effect at
//! its first address, so the kernel's binary search within a page never needs the page before. Rows
//! are packed to 4 bytes: the offset in the page, and the index of the rule given by the caller's
//! interner (rules are shared by all tables).

use sonde_abi::{
    PackedRow, UnwindRow, UnwindRule,
    unwind::{PAGE_SHIFT, ROWS_PER_BLOCK, cfa},
};

/// The interner has no room for another distinct rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RulesFull;

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
    pub(crate) blocks: Vec<Vec<PackedRow>>,
    /// Every page with at least one rule other than "no information".
    pub(crate) pages: Vec<PagePlace>,
}

/// Lays out `rows` (sorted by pc, as the table builder makes them), numbering rules with `intern`.
pub(crate) fn layout(
    rows: &[UnwindRow],
    intern: &mut impl FnMut(UnwindRule) -> Option<u16>,
) -> Result<Layout, RulesFull> {
    let mut out = Layout::default();
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(out);
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
        let packed = page_rows
            .iter()
            .map(|r| {
                Some(PackedRow {
                    pc_low: (r.pc - start) as u16,
                    rule: intern(r.rule())?,
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or(RulesFull)?;
        place(&mut out, page, packed);
    }
    Ok(out)
}

fn place(out: &mut Layout, page: u32, rows: Vec<PackedRow>) {
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
pub(crate) mod tests {
    use std::collections::HashMap;

    use sonde_abi::unwind::rbp;

    use super::*;

    /// An interner as the store keeps one: indices in order of first use.
    #[derive(Default)]
    pub(crate) struct Rules(pub(crate) Vec<UnwindRule>, HashMap<UnwindRule, u16>);

    impl Rules {
        pub(crate) fn intern(&mut self, rule: UnwindRule) -> Option<u16> {
            if let Some(i) = self.1.get(&rule) {
                return Some(*i);
            }
            let i = u16::try_from(self.0.len()).ok()?;
            self.0.push(rule);
            self.1.insert(rule, i);
            Some(i)
        }
    }

    fn row(pc: u32, rule: u8, offset: u16) -> UnwindRow {
        UnwindRow {
            pc,
            cfa_offset: offset,
            rbp_offset: 0,
            kind: rule | rbp::SAME,
        }
    }

    /// The rule in effect at `pc` as the kernel finds it: page entry, then the last row <= pc.
    fn lookup(l: &Layout, rules: &Rules, pc: u32) -> Option<UnwindRule> {
        let p = l.pages.iter().find(|p| p.page == pc >> PAGE_SHIFT)?;
        let rows = &l.blocks[p.block][p.first as usize..(p.first + p.count) as usize];
        assert_eq!(rows[0].pc_low, 0, "a page starts at its first address");
        let low = (pc & ((1 << PAGE_SHIFT) - 1)) as u16;
        let found = rows.iter().rev().find(|r| r.pc_low <= low)?;
        Some(rules.0[found.rule as usize])
    }

    fn laid_out(rows: &[UnwindRow]) -> (Layout, Rules) {
        let mut rules = Rules::default();
        let l = layout(rows, &mut |r| rules.intern(r)).unwrap();
        (l, rules)
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
        let (l, rules) = laid_out(&rows);
        assert_eq!(lookup(&l, &rules, 0x1010).unwrap().cfa_offset, 8);
        assert_eq!(lookup(&l, &rules, 0x1500).unwrap().cfa_offset, 16);
        assert_eq!(lookup(&l, &rules, 0x2000).unwrap().cfa_rule(), cfa::RBP);
        assert_eq!(lookup(&l, &rules, 0x20ff).unwrap().cfa_rule(), cfa::RBP);
        assert_eq!(lookup(&l, &rules, 0x2100).unwrap().cfa_rule(), cfa::NO_INFO);
        assert_eq!(lookup(&l, &rules, 0x1000).unwrap().cfa_rule(), cfa::NO_INFO);
        assert!(l.pages.iter().all(|p| p.page != 3 && p.page != 4));
        assert_eq!(lookup(&l, &rules, 0x5020).unwrap().cfa_offset, 8);
        assert_eq!(l.pages.len(), 3);
        // Four distinct rules: rsp+8, rsp+16, rbp+16, no information.
        assert_eq!(rules.0.len(), 4);
    }

    #[test]
    fn pages_never_straddle_blocks() {
        // 3 pages of 3000 rows each: a block holds 8192, so the third cannot share the first.
        let rows: Vec<UnwindRow> = (0..3u32)
            .flat_map(|p| {
                (0..3000u32).map(move |i| row(p * 4096 + i, cfa::RSP, (i % 7) as u16 * 8))
            })
            .collect();
        let (l, rules) = laid_out(&rows);
        assert_eq!(l.blocks.len(), 2);
        for p in &l.pages {
            assert!(p.first as usize + p.count as usize <= l.blocks[p.block].len());
        }
        assert!(l.blocks.iter().all(|b| b.len() <= ROWS_PER_BLOCK));
        assert_eq!(
            lookup(&l, &rules, 2 * 4096 + 2999).unwrap().cfa_offset,
            (2999 % 7) * 8
        );
    }

    #[test]
    fn a_full_interner_fails_the_layout() {
        let rows: Vec<UnwindRow> = (0..10)
            .map(|i| row(i * 8, cfa::RSP, i as u16 * 8))
            .collect();
        let mut given = 0u16;
        let mut intern = |_| {
            given += 1;
            (given <= 3).then_some(given)
        };
        assert_eq!(layout(&rows, &mut intern).unwrap_err(), RulesFull);
    }
}
