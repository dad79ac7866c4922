//! `sonde record --output` writes under a temporary name and renames on success, as root with real
//! BPF:
//! - a recording that fails (a flame graph was asked for, and the recorded process never ran) leaves
//!   an existing output file byte for byte as it was, and no temporary file behind;
//! - a recording that succeeds replaces it with a valid profile, again with no temporary file left.

use crate::common;

use std::path::Path;

use common::*;

/// Names in `dir` that look like sonde's temporary files.
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn a_failed_recording_leaves_the_existing_output_untouched() {
    require_root();
    let dir = temp_dir("record_atomic");
    let output = dir.join("profile.pb.gz");
    let flamegraph = dir.join("flame.svg");
    let before = b"an earlier profile that must survive a failed recording".to_vec();
    std::fs::write(&output, &before).unwrap();
    std::fs::write(&flamegraph, b"an earlier flame graph").unwrap();

    // A sleeping process takes no on-CPU sample, so there is nothing to draw: the recording fails.
    let sleeper = Workload::adopt(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap(),
    );
    let pid = sleeper.pid().to_string();
    let args = [
        "record",
        "--duration",
        "1",
        "--pid",
        &pid,
        "--output",
        output.to_str().unwrap(),
        "--flamegraph",
        flamegraph.to_str().unwrap(),
    ];
    let out = sonde(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the recording should fail:\n{stderr}"
    );
    assert!(stderr.contains("no samples were collected"), "{stderr}");
    assert_eq!(
        std::fs::read(&output).unwrap(),
        before,
        "the existing --output was modified by a failed recording"
    );
    assert_eq!(
        std::fs::read(&flamegraph).unwrap(),
        b"an earlier flame graph",
        "the existing --flamegraph was modified"
    );
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));

    // A recording that succeeds replaces the file with a real profile.
    let bin = build_workload("cpu_split", "cpu_split_atomic", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    record_pid(workload.pid(), "2", &[], &output);
    let profile = read_pprof(&output);
    assert!(
        total(&resolve(&profile), workload.pid(), 0) > 0,
        "the new profile holds the workload's samples"
    );
    assert!(temp_files(&dir).is_empty(), "{:?}", temp_files(&dir));
}
