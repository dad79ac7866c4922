//! Turns per-FDE rows into the final table: FDEs in address order (a later-starting FDE overrides an
//! earlier one from its start), a `NO_INFO` row where an FDE ends and none starts, then equal
//! neighbours merged so the kernel's binary search runs over as few rows as possible.

use sonde_abi::UnwindRow;
use sonde_abi::unwind::{cfa, rbp};

use super::cfi::FdeRows;
use super::{FrameSource, TableStats};

/// Orders the rows of `fdes` (ranges into `rows`) into the final table.
pub(super) fn assemble(mut fdes: Vec<FdeRows>, rows: &[UnwindRow]) -> Vec<UnwindRow> {
    // Stable: of two FDEs starting at the same address, the later in the section wins, as it would
    // with the overriding below.
    fdes.sort_by_key(|fde| fde.start);
    let mut out = Vec::with_capacity(rows.len() + fdes.len());
    for fde in &fdes {
        for row in &rows[fde.rows.clone()] {
            push(&mut out, *row);
        }
        // Without it, the gap up to the next FDE would be unwound with this function's last rule;
        // the next FDE replaces it when it starts right here.
        push(&mut out, no_info(fde.end));
    }
    out.dedup_by(|a, b| same_rule(a, b));
    out
}

/// The longest CFI gap taken for entry code (ld.so's is 65 bytes): a longer one holds more than the
/// entry stub, and code in it would be called a thread root wrongly.
const MAX_ENTRY_GAP: u32 = 256;

/// Makes the CFI gap holding the ELF entry point, if it is one, a thread root (`END`). The kernel
/// starts a process there with rbp = 0 and nothing above it; glibc's `_start` of an executable says
/// so in its CFI, but ld.so's `_start` and `_dl_start_user` (where every dynamically linked process
/// starts, and returns to for `_dl_init`) are assembly without CFI, so the walk of a process in its
/// first milliseconds would end there as a frame-pointer chain's end, not at its root.
pub(super) fn mark_entry_root(rows: &mut [UnwindRow], entry: u64) {
    let Ok(entry) = u32::try_from(entry) else {
        return;
    };
    let at = rows.partition_point(|row| row.pc <= entry);
    let Some(i) = at.checked_sub(1) else {
        return;
    };
    let gap_end = rows.get(i + 1).map_or(u32::MAX, |next| next.pc);
    let row = &mut rows[i];
    if entry != 0 && row.cfa_rule() == cfa::NO_INFO && gap_end - row.pc <= MAX_ENTRY_GAP {
        row.kind = cfa::END | rbp::SAME;
    }
}

/// Counts the kinds of rows of the final table.
pub(super) fn stats(rows: &[UnwindRow], fdes: u64, source: FrameSource) -> TableStats {
    let count = |rules: &[u8]| {
        let n = rows
            .iter()
            .filter(|row| rules.contains(&row.cfa_rule()))
            .count();
        n as u64
    };
    TableStats {
        fdes,
        bad_fdes: 0,
        rows: rows.len() as u64,
        unsupported_rows: count(&[cfa::UNSUPPORTED]),
        plt_rows: count(&[cfa::PLT]),
        signal_rows: count(&[cfa::SIGNAL]),
        end_rows: count(&[cfa::END]),
        source,
        runtime_functions: 0,
    }
}

/// Appends `row`, replacing the rows it starts at or before: a zero-length gimli row, the `NO_INFO`
/// row of the previous FDE, or the rest of an FDE that this one overlaps.
fn push(out: &mut Vec<UnwindRow>, row: UnwindRow) {
    while out.last().is_some_and(|last| last.pc >= row.pc) {
        out.pop();
    }
    out.push(row);
}

fn no_info(pc: u32) -> UnwindRow {
    UnwindRow {
        pc,
        cfa_offset: 0,
        rbp_offset: 0,
        kind: cfa::NO_INFO | rbp::SAME,
    }
}

fn same_rule(a: &UnwindRow, b: &UnwindRow) -> bool {
    (a.kind, a.cfa_offset, a.rbp_offset) == (b.kind, b.cfa_offset, b.rbp_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsp(pc: u32, offset: u16) -> UnwindRow {
        UnwindRow {
            pc,
            cfa_offset: offset,
            rbp_offset: 0,
            kind: cfa::RSP,
        }
    }

    /// Builds `FdeRows` over one shared row vector, as `cfi::collect` does.
    fn fdes(spec: &[(u32, u32, &[UnwindRow])]) -> (Vec<FdeRows>, Vec<UnwindRow>) {
        let mut rows = Vec::new();
        let mut fdes = Vec::new();
        for (start, end, fde_rows) in spec {
            let first = rows.len();
            rows.extend_from_slice(fde_rows);
            fdes.push(FdeRows {
                start: *start,
                end: *end,
                rows: first..rows.len(),
            });
        }
        (fdes, rows)
    }

    #[test]
    fn the_entry_point_in_a_short_gap_is_a_root_and_nowhere_else() {
        let (fdes, rows) = fdes(&[
            (0x1000, 0x1050, &[rsp(0x1000, 8)]),
            (0x1090, 0x10a0, &[rsp(0x1090, 8)]),
        ]);
        let table = assemble(fdes, &rows);
        let rule_at =
            |t: &[UnwindRow], pc: u32| t[t.partition_point(|r| r.pc <= pc) - 1].cfa_rule();
        // In a 64-byte gap: a root, the whole gap.
        let mut marked = table.clone();
        mark_entry_root(&mut marked, 0x1060);
        assert_eq!(rule_at(&marked, 0x1050), cfa::END);
        assert_eq!(rule_at(&marked, 0x108f), cfa::END);
        assert_eq!(rule_at(&marked, 0x1090), cfa::RSP);
        // Inside an FDE, in a gap longer than entry code, or past the last row: nothing changes.
        for entry in [0x1000, 0x1010, 0x10a0, 0] {
            let mut unmarked = table.clone();
            mark_entry_root(&mut unmarked, entry);
            assert_eq!(unmarked, table, "entry {entry:#x}");
        }
    }

    #[test]
    fn adjacent_fdes_leave_no_gap_row_and_gaps_get_one() {
        let (f, r) = fdes(&[
            (0x20, 0x30, &[rsp(0x20, 8)]),
            (0x10, 0x20, &[rsp(0x10, 8), rsp(0x11, 16)]),
        ]);
        assert_eq!(
            assemble(f, &r),
            vec![rsp(0x10, 8), rsp(0x11, 16), rsp(0x20, 8), no_info(0x30)]
        );
        let (f, r) = fdes(&[(0x10, 0x20, &[rsp(0x10, 8)]), (0x28, 0x30, &[rsp(0x28, 8)])]);
        assert_eq!(
            assemble(f, &r),
            vec![rsp(0x10, 8), no_info(0x20), rsp(0x28, 8), no_info(0x30)]
        );
    }

    #[test]
    fn equal_neighbours_merge_and_same_pc_keeps_the_last() {
        let (f, r) = fdes(&[(
            0x10,
            0x20,
            &[rsp(0x10, 8), rsp(0x12, 8), rsp(0x14, 16), rsp(0x14, 24)],
        )]);
        assert_eq!(
            assemble(f, &r),
            vec![rsp(0x10, 8), rsp(0x14, 24), no_info(0x20)]
        );
    }

    #[test]
    fn a_later_fde_overrides_from_its_start() {
        let (f, r) = fdes(&[
            (0x10, 0x40, &[rsp(0x10, 8), rsp(0x18, 16), rsp(0x30, 8)]),
            (0x20, 0x28, &[rsp(0x20, 32)]),
        ]);
        assert_eq!(
            assemble(f, &r),
            vec![rsp(0x10, 8), rsp(0x18, 16), rsp(0x20, 32), no_info(0x28)]
        );
    }
}
