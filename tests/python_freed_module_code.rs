//! Code freed before sonde read it is named: a module's code object lives while the module body runs
//! (an import), then is freed, often before userspace reads the object the kernel announced, and
//! its name and file strings may go with it. The kernel copies both strings into the announcement.
//!
//! `py_freed_module.py` compiles, as `generated_N.py`, a module body (48 sizes) that defines, calls
//! and deletes `spin_N`, with a new N each pass, under Debian's python3, recorded for 4 s: every
//! pass frees its code objects and both strings. Every Python frame `churn` ran must be named, as
//! `<module>` or `spin_N` in `generated_N.py` (a name and a file of one pass). Reading the object
//! alone left 5-17% of the module frames unnamed in each of 4 runs here, with one file for all
//! passes, whose string lived on.
//!
//! Not asserted: that a frame is named after its own pass. Python frames are stored by their code's
//! address, and a later pass's code often takes a freed one's address within the window (all of
//! `spin_N` share one here): the frames of both are named after one of them (README, Python).

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

/// The pass a frame of the generated code was named after: N of `generated_N.py` (and of `spin_N`),
/// or why its name and file are not of one pass.
fn pass_of(frame: &Frame) -> Result<u64, String> {
    let pass = frame
        .file
        .strip_prefix("generated_")
        .and_then(|f| f.strip_suffix(".py"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{} in {}: not a generated file", frame.function, frame.file))?;
    match frame.function.as_str() {
        "<module>" => Ok(pass),
        f if f == format!("spin_{pass}") => Ok(pass),
        f => Err(format!("{f} in {}: another pass's name", frame.file)),
    }
}

#[test]
fn code_freed_before_it_was_read_is_named_as_it_ran() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_freed_module.py", &[]);
    let (summary, samples) = record_python(workload.pid(), "4", &[], "python_freed_module");
    drop(workload);

    // The frames `churn` ran, leaf first: the module bodies and their functions, named or not.
    let runs: Vec<Vec<&Frame>> = samples
        .iter()
        .filter_map(|s| {
            let churn = s.python_position("churn")?;
            let run: Vec<&Frame> = s.frames[..churn].iter().filter(|f| f.is_python()).collect();
            (!run.is_empty()).then_some(run)
        })
        .collect();
    let frames = runs.iter().map(Vec::len).sum::<usize>();
    let unnamed = runs.iter().flatten().filter(|f| f.function == "?").count();
    let spin = runs
        .iter()
        .flatten()
        .filter(|f| f.function.starts_with("spin_"))
        .count();
    let wrong: Vec<String> = runs
        .iter()
        .flatten()
        .filter(|f| f.function != "?")
        .filter_map(|f| pass_of(f).err())
        .collect();
    eprintln!(
        "{} samples, {} in generated code ({frames} frames, {spin} of spin_N), {unnamed} unnamed, \
         {} misnamed\n{summary}",
        samples.len(),
        runs.len(),
        wrong.len()
    );
    assert!(
        runs.len() >= 100 && spin >= 50,
        "only {} samples in the generated code of 4 s ({spin} in spin_N)",
        runs.len()
    );
    assert_eq!(unnamed, 0, "{unnamed} of {frames} frames unnamed");
    assert!(
        wrong.is_empty(),
        "{} of {frames} frames misnamed: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}
