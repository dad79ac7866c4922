//! `--runtimes` without `python`: a Python process is profiled as before this feature, native frames
//! only. Debian's
//! `/usr/bin/python3` runs `py_split.py`; no sample has a `[python]` frame, and the interpreter's own
//! evaluation loop (`_PyEval_EvalFrameDefault`, exported in `.dynsym`) shows instead.

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn python_off_leaves_native_frames_only() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_split.py", &["30"]);
    let pid = workload.pid();
    let (summary, samples) = record_python(pid, "3", &["--runtimes", "go,java,node"], "python_off");
    drop(workload);
    let all = weight(&samples);
    let with_python: Vec<String> = samples
        .iter()
        .filter(|s| s.python().next().is_some())
        .take(5)
        .map(|s| s.describe())
        .collect();
    let eval = weight(samples.iter().filter(|s| {
        s.frames
            .iter()
            .any(|f| f.function == "_PyEval_EvalFrameDefault")
    }));
    eprintln!("samples={all} with the eval loop={eval}\n{summary}");
    assert!(all > 100, "only {all} samples in 3 s\n{summary}");
    assert!(
        with_python.is_empty(),
        "--runtimes without python still gives Python frames:\n{}",
        with_python.join("\n")
    );
    assert!(
        eval as f64 >= 0.9 * all as f64,
        "only {eval} of {all} samples show _PyEval_EvalFrameDefault without python among the runtimes"
    );
}
