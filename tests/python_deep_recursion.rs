//! Deep recursion: `py_recursion.py` recurses 400 Python calls deep under Debian's `/usr/bin/python3`
//! and burns its CPU in `bottom`. A stored stack holds MAX_STACK_DEPTH = 1,024 words, a word a
//! native or Python frame (`sonde_abi::MAX_STACK_DEPTH`), so all 401 `recurse` frames are there, with
//! `main` and `<module>` under them, and no Python walk is cut.

use crate::common;
use crate::common::python;

use common::{require_root, summary_field};
use python::*;

#[test]
fn a_recursion_400_deep_is_whole_to_its_module() {
    require_root();
    assert_eq!(
        sonde_abi::MAX_STACK_DEPTH,
        1024,
        "the documented depth changed: update this test"
    );
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_recursion.py", &["30", "400"]);
    let pid = workload.pid();
    let (summary, samples) = record_python(pid, "5", &["--frequency", "99"], "python_recursion");
    drop(workload);
    let bottom: Vec<&PySample> = samples.iter().filter(|s| s.has_python("bottom")).collect();
    let depth = |s: &PySample| s.python().filter(|f| f.function == "recurse").count();
    let bottom_weight = weight(bottom.iter().copied());
    let whole = |s: &&PySample| depth(s) > 400 && s.has_python("main") && s.has_python("<module>");
    let deep_weight = weight(bottom.iter().copied().filter(whole));
    let deepest = bottom.iter().map(|s| depth(s)).max().unwrap_or(0);
    let longest = bottom.iter().map(|s| s.frames.len()).max().unwrap_or(0);
    eprintln!(
        "bottom samples={bottom_weight} with 400 recurse, main and <module>={deep_weight} \
         deepest={deepest} longest={longest}\n{summary}"
    );
    assert!(
        bottom_weight > 100,
        "only {bottom_weight} samples in bottom of {} in 5 s",
        weight(&samples)
    );
    assert!(
        deep_weight as f64 >= 0.9 * bottom_weight as f64,
        "{deep_weight} of {bottom_weight} bottom samples have 400 recurse frames and their module; \
         deepest {deepest}:\n{}",
        bottom
            .iter()
            .take(3)
            .map(|s| s.describe())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        summary_field(&summary, "python_truncated"),
        0.0,
        "Python walks cut\n{summary}"
    );
}
