//! Python scripts that live a third of a second show their Python frames from their first sample:
//! once userspace has found CPython in `/usr/bin/python3`, the kernel hands each new process that
//! maps it the interpreter's settings itself (`PY_FILES`, at exec), where userspace would capture it
//! tens of milliseconds later, or, on a busy node, after it exited.
//!
//! A shell loop runs Debian's python3 on `py_split.py` for 0.3 s, again and again, while sonde
//! records the host for 4 s. The kernel counts the processes it gave settings
//! (`python_processes_by_binary`): almost every process run, which is 0 without the mechanism. Of
//! the samples of those processes, at least 95% show their Python frames where the stack enters the
//! interpreter (no `_PyEval_EvalFrameDefault` left unmerged), and their time in the three functions
//! is named.

use std::collections::BTreeSet;

use crate::common;
use crate::common::python;

use common::{
    host::{ShellLoop, record_host},
    require_root, summary_field, temp_dir,
};
use python::*;

#[test]
fn python_processes_living_a_third_of_a_second_are_walked_from_their_first_sample() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    let runs = ShellLoop::start(&format!(
        "while :; do {} {} 0.3 || exit 1; done",
        python.display(),
        script("py_split.py").display()
    ));
    // The first run is the one userspace captures and finds CPython in.
    std::thread::sleep(std::time::Duration::from_millis(700));
    let out = temp_dir("python_short_lived").join("profile.pb.gz");
    let summary = record_host("4", &out);
    drop(runs);

    let samples: Vec<PySample> = resolve_frames(&common::read_pprof(&out))
        .into_iter()
        .filter(|s| s.comm == "python3" && s.has_python("<module>"))
        .collect();
    // Every sample of a process that ran the script: those with the script's frames, and those of
    // the same processes without (the ones at issue).
    let pids: BTreeSet<i64> = samples.iter().map(|s| s.pid).collect();
    let all: Vec<PySample> = resolve_frames(&common::read_pprof(&out))
        .into_iter()
        .filter(|s| s.comm == "python3" && pids.contains(&s.pid))
        .collect();
    let unmerged: Vec<&PySample> = all
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|f| !f.is_python() && f.function == "_PyEval_EvalFrameDefault")
        })
        .collect();
    let named = weight(
        all.iter()
            .filter(|s| SPLIT.iter().any(|(f, _)| s.has_python(f))),
    );
    let (total, missing) = (weight(&all), weight(unmerged.iter().copied()));
    let by_binary = summary_field(&summary, "python_processes_by_binary");
    eprintln!(
        "{} processes sampled, {by_binary} given settings by the kernel; {total} samples, {missing} \
         without their Python frames, {named} in the three functions\n{}\n{summary}",
        pids.len(),
        unmerged
            .iter()
            .take(4)
            .map(|s| s.describe())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        pids.len() >= 8 && total >= 200,
        "only {} python processes and {total} samples in 4 s of a 0.3 s loop",
        pids.len()
    );
    assert!(
        by_binary >= 0.8 * pids.len() as f64,
        "the kernel gave {by_binary} of {} processes their interpreter's settings",
        pids.len()
    );
    assert!(
        missing as f64 <= 0.05 * total as f64,
        "{missing} of {total} samples lack their Python frames (want at most 5%)"
    );
    assert!(
        named as f64 >= 0.75 * total as f64,
        "{named} of {total} samples are in burn_fifty/thirty/twenty (want 75%: the rest is start-up)"
    );
}
