//! Puts a stack's interpreted frames where they ran, for the interpreters whose walker appends them
//! after the native frames (CPython, CRuby): each native call of the interpreter's loop (CPython's
//! `_PyEval_EvalFrameDefault`, CRuby's `vm_exec_core`) is replaced by the frames that call ran, leaf
//! first.
//!
//! The kernel stores the interpreted frames leaf to root after the native ones, the root-most frame of
//! each loop call marked `entry` (`sonde_abi::python`'s `PY_ENTRY`, `sonde_abi::ruby`'s `RB_FINISH`).
//! So the frames split into groups, each ending at an entry frame, and group i (from the leaf) belongs
//! to the i-th loop frame (from the leaf). Native frames between two loop frames (a C builtin calling
//! back into the interpreter, zlib under a Python function) stay where they are. Groups left over
//! when the native walk was cut short go at the root end; loop frames left without a group stay
//! native.
//!
//! One exception pairs them from the root: a walk that reached its thread's root (its last frame
//! closes a group: the kernel leaves the last frame of a walk it cut open) with fewer groups than
//! loop frames. Frames are pushed and popped at the leaf only, so the loop call without a group is the
//! leaf-most: one caught entering (its first frame not yet current) or leaving (its last frame
//! already popped, PHP's JIT freeing a closure). Paired from the leaf, every group would sit one
//! loop call too deep, and the root-most loop frame (a JIT's, unnamed) would be left over.

use super::FrameTally;
use crate::profile::Frame;

/// One interpreted frame of a stack and whether it is the first (root-most) frame of its loop call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupedFrame {
    /// The frame as it goes into the profile.
    pub(crate) frame: Frame,
    /// The kernel's `entry` mark.
    pub(crate) entry: bool,
}

/// `native` (leaf to root) with the words one runtime appended to its stack (`words`, leaf to root,
/// each with its `entry` mark) named by `name` and merged in place of the loop frames `is_loop`
/// finds, counted in `tally`. Without `name` (the process runs no interpreter known to sonde, which
/// the kernel should then not have walked) they are dropped, counted too.
pub(crate) fn merge_appended<W>(
    native: Vec<Frame>,
    words: &[(W, bool)],
    name: Option<&dyn Fn(&W) -> Frame>,
    is_loop: impl Fn(&[Frame], usize) -> bool,
    tally: &mut FrameTally,
) -> Vec<Frame> {
    if words.is_empty() {
        return native;
    }
    let Some(name) = name else {
        tally.dropped += words.len() as u64;
        return native;
    };
    let frames: Vec<GroupedFrame> = words
        .iter()
        .map(|(word, entry)| GroupedFrame {
            frame: name(word),
            entry: *entry,
        })
        .collect();
    tally.frames += frames.len() as u64;
    tally.unreadable += frames.iter().filter(|f| f.frame.symbols.is_empty()).count() as u64;
    merge(native, frames, is_loop)
}

/// `native` (leaf to root) with its loop frames (those `is_loop` says are, by index) replaced by
/// `interpreted` (leaf to root).
pub(crate) fn merge(
    native: Vec<Frame>,
    interpreted: Vec<GroupedFrame>,
    is_loop: impl Fn(&[Frame], usize) -> bool,
) -> Vec<Frame> {
    if interpreted.is_empty() {
        return native;
    }
    let reached_root = interpreted.last().is_some_and(|f| f.entry);
    let mut groups: Vec<Vec<Frame>> = Vec::new();
    let mut open: Vec<Frame> = Vec::new();
    for f in interpreted {
        open.push(f.frame);
        if f.entry {
            groups.push(std::mem::take(&mut open));
        }
    }
    // Frames after the last entry mark: the kernel's walk was cut (depth cap) inside a call; they
    // still belong to the next evaluation-loop frame.
    if !open.is_empty() {
        groups.push(open);
    }
    let loops: Vec<bool> = (0..native.len()).map(|i| is_loop(&native, i)).collect();
    // Loop calls left native at the leaf (see the module's documentation).
    let mut idle = if reached_root {
        let calls = loops.iter().filter(|l| **l).count();
        calls.saturating_sub(groups.len())
    } else {
        0
    };
    let mut groups = groups.into_iter();
    let mut out = Vec::with_capacity(native.len() + groups.len());
    for (f, is_loop) in native.into_iter().zip(loops) {
        if is_loop && idle > 0 {
            idle -= 1;
            out.push(f);
        } else if is_loop && let Some(group) = groups.next() {
            out.extend(group);
        } else {
            out.push(f);
        }
    }
    out.extend(groups.flatten());
    out
}

/// Frames for the merge tests of each interpreter.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::sync::Arc;

    use super::{Frame, GroupedFrame};
    use crate::profile::{FrameKind, Symbol};

    /// A native frame named `name`, or unnamed.
    pub(crate) fn native_frame(name: Option<&str>) -> Frame {
        Frame {
            address: 0x1000,
            kind: FrameKind::User,
            return_address: false,
            module: None,
            symbols: Arc::from(
                name.map(|n| Symbol {
                    name: n.into(),
                    file: None,
                    line: None,
                })
                .into_iter()
                .collect::<Vec<_>>(),
            ),
        }
    }

    /// An interpreter's frame named `name`, the first of its loop call's when `entry`.
    pub(crate) fn grouped(name: &str, entry: bool) -> GroupedFrame {
        GroupedFrame {
            frame: native_frame(Some(name)),
            entry,
        }
    }

    /// The function names of `frames`, `?` for an unnamed one.
    pub(crate) fn names(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.function().unwrap_or("?")).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::profile::{FrameKind, Symbol};

    fn native(name: &str) -> Frame {
        fixtures::native_frame(Some(name))
    }

    fn py(name: &str, entry: bool) -> GroupedFrame {
        GroupedFrame {
            frame: Frame {
                address: 0x2000,
                kind: FrameKind::User,
                return_address: false,
                module: None,
                symbols: Arc::from(vec![Symbol {
                    name: name.into(),
                    file: Some("app.py".into()),
                    line: Some(3),
                }]),
            },
            entry,
        }
    }

    /// CPython's loop, as its namer tells it.
    fn merge(native: Vec<Frame>, python: Vec<GroupedFrame>) -> Vec<Frame> {
        super::merge(native, python, |frames, i| {
            frames[i]
                .function()
                .is_some_and(|f| f.starts_with("_PyEval_EvalFrameDefault"))
        })
    }

    fn names(frames: &[Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.function().unwrap()).collect()
    }

    /// 3.11+: one evaluation-loop call runs several Python frames (Python-to-Python calls do not
    /// recurse in C).
    #[test]
    fn one_eval_frame_takes_the_whole_group() {
        let out = merge(
            vec![
                native("sqrt"),
                native("_PyEval_EvalFrameDefault"),
                native("PyEval_EvalCode"),
                native("main"),
            ],
            vec![py("leaf", false), py("middle", false), py("<module>", true)],
        );
        assert_eq!(
            names(&out),
            [
                "sqrt",
                "leaf",
                "middle",
                "<module>",
                "PyEval_EvalCode",
                "main"
            ]
        );
    }

    /// Python -> C builtin -> Python: two evaluation-loop calls, two groups, the builtin's native
    /// frames between them.
    #[test]
    fn nested_calls_keep_the_builtin_between_their_groups() {
        let out = merge(
            vec![
                native("_PyEval_EvalFrameDefault"),
                native("_PyObject_VectorcallTstate"),
                native("builtin_sorted"),
                native("_PyEval_EvalFrameDefault.cold"),
                native("Py_RunMain"),
            ],
            vec![
                py("key_func", true),
                py("sort_all", false),
                py("<module>", true),
            ],
        );
        assert_eq!(
            names(&out),
            [
                "key_func",
                "_PyObject_VectorcallTstate",
                "builtin_sorted",
                "sort_all",
                "<module>",
                "Py_RunMain"
            ]
        );
    }

    /// The native walk was cut before reaching the outer evaluation-loop frame: its group goes at
    /// the root end.
    #[test]
    fn groups_without_an_eval_frame_go_at_the_root_end() {
        let out = merge(
            vec![native("_PyEval_EvalFrameDefault"), native("builtin_map")],
            vec![py("inner", true), py("outer", false), py("<module>", true)],
        );
        assert_eq!(names(&out), ["inner", "builtin_map", "outer", "<module>"]);
        // A group cut by the depth cap (no entry mark) still takes its evaluation-loop frame.
        let out = merge(
            vec![native("_PyEval_EvalFrameDefault"), native("main")],
            vec![py("a", false), py("b", false)],
        );
        assert_eq!(names(&out), ["a", "b", "main"]);
    }

    /// 3.9/3.10: every Python frame is its own evaluation-loop call; an evaluation-loop frame without
    /// a group (the Python walk was cut: the kernel left its last frame open) stays native.
    #[test]
    fn one_frame_per_group_before_3_11() {
        let out = merge(
            vec![
                native("_PyEval_EvalFrameDefault"),
                native("function_code_fastcall"),
                native("_PyEval_EvalFrameDefault"),
                native("_PyEval_EvalCode"),
                native("_PyEval_EvalFrameDefault"),
                native("main"),
            ],
            vec![py("f", true), py("g", false)],
        );
        assert_eq!(
            names(&out),
            [
                "f",
                "function_code_fastcall",
                "g",
                "_PyEval_EvalCode",
                "_PyEval_EvalFrameDefault",
                "main"
            ]
        );
        assert_eq!(merge(vec![native("main")], Vec::new()).len(), 1);
    }

    /// A walk that reached its root with a loop call too few: the leaf-most call ran nothing yet (or
    /// any more), so the groups pair from the root and that call's frame stays native.
    #[test]
    fn a_leaf_loop_call_without_frames_leaves_the_groups_to_the_root() {
        let native = || {
            vec![
                native("_PyEval_EvalFrameDefault"),
                native("builtin_map"),
                native("_PyEval_EvalFrameDefault"),
                native("Py_RunMain"),
            ]
        };
        let out = merge(native(), vec![py("caller", false), py("<module>", true)]);
        assert_eq!(
            names(&out),
            [
                "_PyEval_EvalFrameDefault",
                "builtin_map",
                "caller",
                "<module>",
                "Py_RunMain"
            ]
        );
        // Cut short (its last frame open), the same walk pairs from the leaf.
        let out = merge(native(), vec![py("caller", false), py("<module>", false)]);
        assert_eq!(
            names(&out),
            [
                "caller",
                "<module>",
                "builtin_map",
                "_PyEval_EvalFrameDefault",
                "Py_RunMain"
            ]
        );
    }
}
