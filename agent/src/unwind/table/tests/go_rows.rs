//! Go code's rows from `.gopclntab`'s SP deltas (`runtimes::go::unwind_rows`) against the
//! `.debug_frame` Go's linker writes from the same deltas, at every byte of `.text`; and a stripped
//! build, which has no CFI at all, getting the same rows from its table alone.

use std::{fs::File, path::Path};

use sonde_abi::unwind::{cfa, rbp};

use super::fixture::{binary, row_at};
use super::{BuiltTable, FrameSource, build_file};
use crate::{
    runtimes::{Runtimes, go::tests::Workspace, registry},
    unwind::table::build_binary,
};

fn with_go_rows(path: &Path) -> BuiltTable {
    let binary = binary(path);
    let rows = registry::unwind_rows(&binary, Runtimes::all()).expect("a Go binary has rows");
    build_binary(&binary, Some(rows)).expect("a table")
}

/// Where both say CFA = rsp + offset, the offsets agree.
fn agree_with_debug_frame(path: &Path) {
    let cfi = build_file(&File::open(path).unwrap()).expect("the linker's .debug_frame");
    assert_eq!(cfi.stats.source, FrameSource::DebugFrame);
    let go = with_go_rows(path);
    assert!(go.stats.runtime_functions > 1000, "{:?}", go.stats);
    let bytes = std::fs::read(path).unwrap();
    let text = super::fixture::section_ranges(&bytes, ".text");
    let (mut compared, mut differ) = (0, Vec::new());
    for pc in text.into_iter().flatten() {
        let (Some(a), Some(b)) = (row_at(&cfi.rows, pc), row_at(&go.rows, pc)) else {
            continue;
        };
        if a.cfa_rule() != cfa::RSP || b.cfa_rule() != cfa::RSP {
            continue;
        }
        compared += 1;
        if a.cfa_offset != b.cfa_offset {
            differ.push((pc, a.cfa_offset, b.cfa_offset));
        }
    }
    assert!(compared > 100_000, "{compared} bytes compared");
    assert!(
        differ.is_empty(),
        "{} of {compared} bytes differ (pc, linker's offset, ours), first {:x?}",
        differ.len(),
        &differ[..differ.len().min(8)]
    );
}

/// Checks Debian's Go 1.19 (`SUBQ; MOVQ BP` prologues) and the newest release (`PUSHQ BP`).
#[test]
fn go_rows_agree_with_the_linkers_debug_frame_stripped_or_not() {
    for ws in [Workspace::new(), Workspace::newest_go()] {
        let full = ws.build("full", &[], false);
        agree_with_debug_frame(&full);
        let stripped = ws.build("stripped", &["-ldflags=-s -w"], false);
        assert!(
            build_file(&File::open(&stripped).unwrap()).is_err(),
            "no CFI"
        );
        let alone = with_go_rows(&stripped);
        assert_eq!(alone.stats.source, FrameSource::Runtime);
        assert_eq!(
            alone.rows,
            with_go_rows(&full).rows,
            "the same code, the same rows"
        );
        // Roots end walks; functions with frames keep the caller's rbp at CFA - 16 in their body.
        assert!(alone.stats.end_rows >= 3, "{:?}", alone.stats);
        let saved = alone
            .rows
            .iter()
            .filter(|r| r.kind == cfa::RSP | rbp::AT_CFA);
        assert!(saved.clone().count() > 1000);
        assert!(
            saved
                .clone()
                .all(|r| r.rbp_offset == -2 && r.cfa_offset >= 16)
        );
    }
}
