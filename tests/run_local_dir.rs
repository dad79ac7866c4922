//! `sonde run` without an endpoint writes tagged gzip pprof files and an index into a data directory; a
//! SIGTERM long before the export interval still flushes the window recorded so far.

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn sigterm_flushes_the_window_into_the_data_directory() {
    require_root();
    let bin = build_workload("cpu_split", "cpu_split_local", FP_FLAGS);
    let mut workload = spawn(&bin, &["60"]);
    let pid = workload.id();
    let dir = temp_dir("run_local");
    let data = dir.join("sonde-data");
    // An interval far longer than the test: only the stop signal can make the window reach the disk.
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args([
            "run",
            "--export-interval",
            "3600",
            "--data-dir",
            data.to_str().unwrap(),
            "--label",
            "service.version=2.4",
        ])
        .env("SONDE_LOG", "warn")
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    let signalled = std::time::Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = daemon.wait().unwrap();
    let stop_time = signalled.elapsed();
    workload.kill().unwrap();
    let _ = workload.wait();
    assert!(status.success(), "exit status {status}");
    assert!(
        stop_time < Duration::from_secs(15),
        "flush on stop took {stop_time:?}"
    );

    let index =
        std::fs::read_to_string(data.join("index.jsonl")).expect("index.jsonl written on stop");
    let entry = index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["tags"]["process.pid"] == serde_json::json!(pid.to_string()))
        .unwrap_or_else(|| panic!("no index entry for pid {pid}:\n{index}"));
    assert_eq!(entry["kind"], "cpu");
    assert_eq!(
        entry["tags"]["service.version"], "2.4",
        "static label in the tags"
    );
    assert_eq!(entry["tags"]["process.executable.name"], "cpu_split_local");
    assert!(
        entry["tags"]["host.name"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    let profile = read_indexed(&data, &entry);
    let samples = resolve(&profile);
    let total_samples = total(&samples, pid, 0);
    assert!(
        total_samples > 100,
        "about 4 s x 99 Hz expected, got {total_samples}"
    );
    assert!(inclusive(&samples, pid, "burn_fifty", 0) > 0);
    let comments: Vec<&str> = profile
        .comment
        .iter()
        .map(|&i| profile.string_table[i as usize].as_str())
        .collect();
    assert!(
        comments.contains(&"service.version=2.4"),
        "tags as pprof comments: {comments:?}"
    );
}
