//! Mixed stacks: `py_zlib.py` calls `zlib.compress` in a loop under Debian's `/usr/bin/python3`. The
//! samples in libz (native `deflate` code) have the Python function that called it, `compress_loop`,
//! as their leaf-most Python frame and `<module>` above it: Python frames root-ward of the native
//! frames in the same stack, the evaluation loop's frames replaced where they stood.

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn zlib_deflate_frames_sit_under_the_python_caller_and_module() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_zlib.py", &["30"]);
    let pid = workload.pid();
    let (summary, samples) = record_python(pid, "6", &["--frequency", "99"], "python_mixed");
    drop(workload);
    let all = weight(&samples);
    let in_libz = |s: &&PySample| s.frames.iter().any(|f| f.mapping.contains("libz.so"));
    let zlib: Vec<&PySample> = samples.iter().filter(in_libz).collect();
    let zlib_weight = weight(zlib.iter().copied());
    // Root-ward of the last libz frame: compress_loop as the first Python frame, then <module>.
    let mixed = |s: &PySample| {
        let Some(last_libz) = s.frames.iter().rposition(|f| f.mapping.contains("libz.so")) else {
            return false;
        };
        let caller = s.python_position("compress_loop");
        let module = s.python_position("<module>");
        s.leaf_python()
            .is_some_and(|f| f.function == "compress_loop")
            && caller.is_some_and(|c| c > last_libz)
            && module.is_some_and(|m| Some(m) > caller)
    };
    let mixed_weight = weight(zlib.iter().copied().filter(|s| mixed(s)));
    let named_deflate = zlib
        .iter()
        .any(|s| s.frames.iter().any(|f| f.function.starts_with("deflate")));
    let examples: Vec<String> = zlib.iter().take(5).map(|s| s.describe()).collect();
    eprintln!(
        "samples={all} in libz={zlib_weight} mixed={mixed_weight}\n{}\n{summary}",
        examples.join("\n")
    );
    assert!(all > 300, "only {all} samples in 6 s\n{summary}");
    assert!(
        zlib_weight as f64 >= 0.5 * all as f64,
        "only {zlib_weight} of {all} samples in libz: zlib.compress should dominate\n{}",
        examples.join("\n")
    );
    assert!(
        named_deflate,
        "no libz frame named deflate*:\n{}",
        examples.join("\n")
    );
    let bad: Vec<String> = zlib
        .iter()
        .filter(|s| !mixed(s))
        .take(10)
        .map(|s| s.describe())
        .collect();
    assert!(
        mixed_weight as f64 >= 0.95 * zlib_weight as f64,
        "{mixed_weight} of {zlib_weight} libz samples have compress_loop (leaf-most Python frame) \
         and <module> root-ward of the libz frames; some that do not:\n{}",
        bad.join("\n")
    );
}
