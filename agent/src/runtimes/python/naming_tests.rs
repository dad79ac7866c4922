//! The symbolizer on stacks holding Python frames, as the kernel stores them, of a live
//! `/usr/bin/python3`: native frames named by blazesym, Python frames read from the process, merged in
//! place of the evaluation loop's frame, and counted.

use std::io::{BufRead as _, BufReader};

use sonde_abi::python::pack_frame;

use crate::{
    profile::ProfileKind,
    runtimes::{Runtime, python::peer::Peer},
    symbolize::test_support::{sample, symbolizer},
};

/// Prints the addresses of `_PyEval_EvalFrameDefault` and `Py_RunMain` and of two code objects.
const SCRIPT: &str = r#"
import ctypes, sys

def leaf():
    return 1

def outer():
    return leaf()

def addr(name):
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value

print(addr("_PyEval_EvalFrameDefault"), addr("Py_RunMain"), id(leaf.__code__), id(outer.__code__), flush=True)
sys.stdin.read()
"#;

#[test]
fn python_frames_replace_the_evaluation_loop_and_are_counted() {
    let mut peer = Peer::start("/usr/bin/python3", SCRIPT);
    let pid = peer.0.id();
    let mut line = String::new();
    BufReader::new(peer.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Vec<u64> = line
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let (eval, run_main, leaf, outer) = (v[0], v[1], v[2], v[3]);
    // Return addresses a few bytes into each function; the root-most Python frame is the entry.
    let words = vec![
        eval + 0x10,
        run_main + 0x10,
        pack_frame(leaf, 0, false),
        pack_frame(outer, 0, true),
    ];

    let mut with_python = crate::capture::Capturer::with(crate::runtimes::Runtime::Python);
    let infos = with_python.ensure_all([pid]);
    let mut s = symbolizer();
    let out = s.symbolize(
        ProfileKind::Cpu,
        &[sample(pid, words.clone(), 3)],
        &infos,
        1,
    );
    let names: Vec<String> = out[0].frames.iter().map(|f| f.display_name()).collect();
    assert_eq!(names, ["leaf", "outer", "Py_RunMain"]);
    let leaf_symbol = &out[0].frames[0].symbols[0];
    assert_eq!(
        (leaf_symbol.file.as_deref(), leaf_symbol.line),
        (Some("<string>"), Some(4))
    );
    let stats = s.stats();
    assert_eq!(
        (
            s.frames_of(Runtime::Python).stacks,
            s.frames_of(Runtime::Python).frames,
            s.frames_of(Runtime::Python).unreadable,
            s.frames_of(Runtime::Python).dropped
        ),
        (3, 6, 0, 0)
    );
    assert_eq!((stats.frames, stats.symbolized), (9, 9));

    // A code address that is not code: an unnamed `[python]` frame, counted.
    let mut bad = words.clone();
    bad[2] = pack_frame(0x1000, 0, false);
    let out = s.symbolize(ProfileKind::Cpu, &[sample(pid, bad, 1)], &infos, 1);
    assert_eq!(out[0].frames[0].display_name(), "[python]+0x1000");
    assert_eq!(s.frames_of(Runtime::Python).unreadable, 1);

    // Without the interpreter (`--python off`), Python words are dropped and counted.
    let without = crate::capture::Capturer::default().ensure_all([pid]);
    let mut s = symbolizer();
    let out = s.symbolize(ProfileKind::Cpu, &[sample(pid, words, 2)], &without, 1);
    let names: Vec<String> = out[0].frames.iter().map(|f| f.display_name()).collect();
    assert_eq!(names, ["_PyEval_EvalFrameDefault", "Py_RunMain"]);
    assert_eq!(
        (
            s.frames_of(Runtime::Python).stacks,
            s.frames_of(Runtime::Python).dropped
        ),
        (0, 4)
    );
}
