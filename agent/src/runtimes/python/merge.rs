//! Puts a stack's Python frames where they ran: each native call of the evaluation loop
//! (`_PyEval_EvalFrameDefault`) is replaced by the Python frames that call ran, leaf first.
//!
//! The kernel stores the Python frames leaf to root after the native ones, the root-most frame of each
//! evaluation-loop call marked `entry` (`sonde_abi::python`). So the Python frames split into groups,
//! each ending at an entry frame, and group i (from the leaf) belongs to the i-th evaluation-loop
//! frame (from the leaf). Native frames between two evaluation-loop frames (a C builtin calling back
//! into Python, zlib under a Python function) stay where they are. Groups left over when the native
//! walk was cut short go at the root end; evaluation-loop frames left without a group stay native.

use crate::profile::Frame;

/// The evaluation loop's function; `.cold` and other compiler-split parts share the prefix.
const EVAL_FRAME: &str = "_PyEval_EvalFrameDefault";

/// One Python frame of a stack and whether it is the first (root-most) frame of its evaluation-loop
/// call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PyFrame {
    /// The frame as it goes into the profile.
    pub(crate) frame: Frame,
    /// The kernel's `entry` mark.
    pub(crate) entry: bool,
}

/// `native` (leaf to root) with its evaluation-loop frames replaced by `python` (leaf to root).
pub(crate) fn merge(native: Vec<Frame>, python: Vec<PyFrame>) -> Vec<Frame> {
    if python.is_empty() {
        return native;
    }
    let mut groups: Vec<Vec<Frame>> = Vec::new();
    let mut open: Vec<Frame> = Vec::new();
    for f in python {
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
    let mut groups = groups.into_iter();
    let mut out = Vec::with_capacity(native.len() + groups.len());
    for f in native {
        if is_eval_frame(&f)
            && let Some(group) = groups.next()
        {
            out.extend(group);
        } else {
            out.push(f);
        }
    }
    out.extend(groups.flatten());
    out
}

fn is_eval_frame(f: &Frame) -> bool {
    f.function()
        .is_some_and(|name| name.starts_with(EVAL_FRAME))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::profile::{FrameKind, Symbol};

    fn native(name: &str) -> Frame {
        Frame {
            address: 0x1000,
            kind: FrameKind::User,
            return_address: false,
            module: None,
            symbols: Arc::from(vec![Symbol {
                name: name.into(),
                file: None,
                line: None,
            }]),
        }
    }

    fn py(name: &str, entry: bool) -> PyFrame {
        PyFrame {
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
    /// a group (the Python walk stopped early) stays native.
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
            vec![py("f", true), py("g", true)],
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
}
