//! A process that exits before the window is drained is still symbolized.

use crate::common;
use common::*;

#[test]
fn a_process_that_exited_mid_window_is_symbolized() {
    require_root();
    let bin = build_workload("short_lived", "short_lived", FP_FLAGS);
    let out = temp_dir("exited").join("profile.pb.gz");
    let sonde = start_recording(&[
        "record",
        "--duration",
        "5",
        "--output",
        out.to_str().unwrap(),
    ]);
    // Started once sonde records (its programs take a while to load), exits 3.5 s before the end.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut child = spawn(&bin, &["1.5"]);
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    // The process is gone well before sonde drains its window.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    let summary = sonde.finish();

    let samples = resolve(&read_pprof(&out));
    let all = total(&samples, pid, 0);
    let named = inclusive(&samples, pid, "short_lived_burn", 0);
    eprintln!("{named} of {all} samples of the exited process name short_lived_burn\n{summary}");
    assert!(
        all > 50,
        "expected ~150 samples of the short-lived process, got {all}"
    );
    assert!(
        named as f64 >= 0.9 * all as f64,
        "exited process not symbolized: {named} of {all}"
    );
}
