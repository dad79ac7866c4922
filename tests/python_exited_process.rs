//! A Python process that exits before the recording ends keeps its Python function names: `py_split.py`
//! under Debian's `/usr/bin/python3` works 2 s inside a 5 s recording of `--pid` (exec'd by a shell
//! once sonde records), then exits. Its samples still carry `burn_fifty`, `burn_thirty` and
//! `burn_twenty` as named Python frames (code objects cannot be read from a process that is gone, so
//! they must have been read while it ran, and kept when sonde captured the process again).

use crate::common;
use crate::common::python;

use common::{require_root, start_recording, temp_dir};
use python::*;

#[test]
fn python_frames_of_a_process_that_exited_mid_recording_are_named() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    // A shell waits for a line, then execs the interpreter (same pid), as shells start scripts: the
    // 2 s of work start once sonde records, however long its programs take to load, and sonde
    // captures the process again at the exec and when the interpreter maps more code.
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("read go && exec \"$0\" \"$1\" 2")
        .arg(&python)
        .arg(script("py_split.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("starting py_split.py");
    let pid = child.id();
    let out = temp_dir("python_exited").join("profile.pb.gz");
    let recording = start_recording(&[
        "record",
        "--duration",
        "5",
        "--pid",
        &pid.to_string(),
        "--output",
        out.to_str().unwrap(),
    ]);
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
    }
    assert!(child.wait().unwrap().success(), "py_split.py failed");
    // The process is gone well before sonde ends its window.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    let summary = recording.finish();
    let samples = of_pid(resolve_frames(&common::read_pprof(&out)), pid);
    let all = weight(&samples);
    let python_frames = weight(samples.iter().filter(|s| s.python().next().is_some()));
    let named = weight(
        samples
            .iter()
            .filter(|s| SPLIT.iter().any(|(f, _)| s.has_python(f))),
    );
    let examples: Vec<String> = samples.iter().take(3).map(|s| s.describe()).collect();
    eprintln!(
        "{all} samples, {python_frames} with Python frames, {named} in the three functions\n{}\n{summary}",
        examples.join("\n")
    );
    assert!(
        all > 50,
        "only {all} samples of the 2 s Python process\n{summary}"
    );
    assert!(
        named as f64 >= 0.9 * all as f64,
        "{named} of {all} samples of the exited process name burn_fifty/thirty/twenty; e.g.:\n{}",
        examples.join("\n")
    );
}
