//! Go code's unwind rows from `.gopclntab`'s SP deltas (pcsp), the table Go's own traceback
//! unwinds with. Frame pointers miss a caller whenever the sample lands in a function that keeps no
//! frame (a leaf loop with nothing spilled): rbp still holds the caller's frame, and the caller's
//! caller is taken for it. The SP delta finds the return address in every function, stripped
//! binaries included (`.gopclntab` survives `-s -w`). How a delta and a prologue become a row is
//! the architecture's (`platform::arch::go_frames`).

use sonde_abi::{
    UnwindRow,
    unwind::{cfa, rbp},
};

use super::{ROOT_FUNCTIONS, elf::is_go, pclntab::GoTable};
use crate::{
    platform::arch::go_frames::{GO_SP_DELTAS, go_frame_pointer_saved, go_row},
    process::Binary,
    runtimes::seam::CodeRows,
};

/// `_func.flag` bits (runtime/symtab.go, Go 1.17 and later).
const FLAG_TOPFRAME: u8 = 1;
const FLAG_SPWRITE: u8 = 2;

/// Go's signal return stubs (the `sa_restorer` of its handlers): below them is the kernel's signal
/// frame, whose registers the walk goes on from.
const SIGNAL_RETURNS: [&str; 2] = ["runtime.sigreturn__sigaction", "runtime.sigreturn"];

/// The rows of every function of Go binary `binary`; None for another binary, or on an
/// architecture whose Go frames are walked by frame pointers.
pub(super) fn rows(binary: &Binary) -> Option<Vec<CodeRows>> {
    if !GO_SP_DELTAS || !is_go(binary) {
        return None;
    }
    let table = GoTable::open(&binary.file).ok()??;
    Some(of_table(&table))
}

/// The rows of every function of `table` (its link-time addresses must fit the table's 32 bits).
pub(super) fn of_table(table: &GoTable) -> Vec<CodeRows> {
    (0..table.functions())
        .map_while(|i| table.sp_deltas(i))
        .filter_map(|f| {
            let (start, end) = (u32::try_from(f.entry).ok()?, u32::try_from(f.end).ok()?);
            let whole = |kind| {
                vec![UnwindRow {
                    pc: start,
                    cfa_offset: 0,
                    rbp_offset: 0,
                    kind: kind | rbp::SAME,
                }]
            };
            let rows = if f.flag & FLAG_TOPFRAME != 0 || ROOT_FUNCTIONS.contains(&f.name.as_str()) {
                // Where a thread or goroutine stack begins (Go 1.16 has no flag: the names say).
                whole(cfa::END)
            } else if SIGNAL_RETURNS.contains(&f.name.as_str()) {
                whole(cfa::SIGNAL)
            } else if f.flag & FLAG_SPWRITE != 0 || f.runs.is_empty() {
                // It writes SP other than by a delta (a stack switch): frame pointers, as before.
                whole(cfa::NO_INFO)
            } else {
                function_rows(table, &f.runs, f.entry, f.end)
            };
            Some(CodeRows { start, end, rows })
        })
        .collect()
}

/// The rows of one function from its SP-delta runs, each run split where its prologue saves the
/// caller's frame pointer.
fn function_rows(table: &GoTable, runs: &[(u64, i32)], entry: u64, end: u64) -> Vec<UnwindRow> {
    let first = runs.iter().find(|(_, delta)| *delta > 0);
    let saved_from = first.and_then(|&(pc, delta)| {
        let code = table.code(entry, end)?;
        let at = go_frame_pointer_saved(code, usize::try_from(pc - entry).ok()?, delta)?;
        Some(entry + at as u64)
    });
    let mut rows = Vec::with_capacity(runs.len() + 1);
    for (i, &(pc, delta)) in runs.iter().enumerate() {
        let next = runs.get(i + 1).map_or(end, |&(pc, _)| pc);
        let saved = saved_from.is_some_and(|from| pc >= from);
        rows.push(go_row(pc as u32, delta, saved));
        // The save lies inside this run (the old prologue's `MOVQ BP` after the `SUBQ`).
        if let Some(from) = saved_from.filter(|&from| pc < from && from < next) {
            rows.push(go_row(from as u32, delta, true));
        }
    }
    rows
}
