//! Deep recursion: `py_recursion.py` recurses 200 Python calls deep under Debian's `/usr/bin/python3`
//! and burns its CPU in `bottom`. A stored stack holds at most MAX_STACK_DEPTH = 127 frames, native and
//! Python together (`sonde_abi::MAX_STACK_DEPTH`), so either all 200 `recurse` frames are there or the
//! stack is at the cap: at least 100 `recurse` frames under `bottom` in the bottom samples, and the
//! kernel counted the Python walks it cut (the summary's `python_walk_truncated`).

use crate::common;
use crate::common::python;

use common::{require_root, summary_field};
use python::*;

#[test]
fn a_recursion_200_deep_fills_the_stack_cap_and_counts_the_truncation() {
    require_root();
    assert_eq!(
        sonde_abi::MAX_STACK_DEPTH,
        127,
        "the documented cap changed: update this test"
    );
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_recursion.py", &["30", "200"]);
    let pid = workload.pid();
    let (summary, samples) = record_python(pid, "5", &["--frequency", "99"], "python_recursion");
    drop(workload);
    let bottom: Vec<&PySample> = samples.iter().filter(|s| s.has_python("bottom")).collect();
    let depth = |s: &PySample| s.python().filter(|f| f.function == "recurse").count();
    let bottom_weight = weight(bottom.iter().copied());
    let deep_weight = weight(bottom.iter().copied().filter(|s| depth(s) >= 100));
    let deepest = bottom.iter().map(|s| depth(s)).max().unwrap_or(0);
    let longest = bottom.iter().map(|s| s.frames.len()).max().unwrap_or(0);
    eprintln!(
        "bottom samples={bottom_weight} with >=100 recurse={deep_weight} deepest={deepest} \
         longest={longest}\n{summary}"
    );
    assert!(
        bottom_weight > 100,
        "only {bottom_weight} samples in bottom of {} in 5 s",
        weight(&samples)
    );
    assert!(
        deep_weight as f64 >= 0.9 * bottom_weight as f64,
        "{deep_weight} of {bottom_weight} bottom samples have 100 recurse frames; deepest {deepest}:\n{}",
        bottom
            .iter()
            .take(3)
            .map(|s| s.describe())
            .collect::<Vec<_>>()
            .join("\n")
    );
    if deepest < 200 {
        let truncated = summary_field(&summary, "python_truncated");
        assert!(
            truncated > 0.0,
            "stacks hold {deepest} of 200 recurse frames, yet no truncated Python walk was counted\n{summary}"
        );
    }
}
