//! A data directory on a small tmpfs that fills up: sonde keeps running and counts the windows it could
//! not write, every index line stays whole, a restart leaves no temporary files, and `sonde diff --data`
//! works on what was written.

use crate::common;
use crate::common::daemon;

use std::{path::Path, process::Command};

use common::*;

/// Unmounts the tmpfs when the test ends, whatever happens.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0).status();
    }
}

fn run(data: &Path, secs: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args([
            "run",
            "--export-interval",
            "1",
            "--duration",
            secs,
            "--metrics-addr",
            "none",
            "--label",
            "service.version=disk-full",
            "--data-dir",
            data.to_str().unwrap(),
        ])
        .env("SONDE_LOG", "info")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_full_disk_loses_counted_windows_and_leaves_a_readable_directory() {
    require_root();
    let dir = temp_dir("disk_full");
    let mount = dir.join("small");
    std::fs::create_dir_all(&mount).unwrap();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=40k,mode=0700", "tmpfs"])
        .arg(&mount)
        .status()
        .expect("mount(8) from util-linux");
    assert!(status.success(), "mounting a tmpfs needs root");
    let _mounted = Mounted(&mount);
    let data = mount.join("data");

    let bin = build_workload("cpu_split", "cpu_split_disk_full", FP_FLAGS);
    let _workload = Workload::start(&bin, &["60"]);
    let (ok, stderr) = run(&data, "12");
    assert!(ok, "a full disk is not fatal:\n{stderr}");
    let summary = daemon::exit_summary(&stderr);
    let produced = daemon::field(&summary, "windows_produced", &stderr);
    let lost = daemon::field(&summary, "windows_lost", &stderr);
    let write_failed = daemon::field(
        &summary,
        r#"sonde_export_dropped_batches_total{reason="write_failed"}"#,
        &stderr,
    );
    assert_eq!(
        write_failed, lost,
        "each lost window counted as a failed write"
    );
    assert!(lost > 0, "the disk filled, windows were lost:\n{stderr}");
    assert!(lost < produced, "the first windows fit:\n{stderr}");
    assert!(
        stderr.contains("No space left on device"),
        "the reason is logged:\n{stderr}"
    );

    let index = std::fs::read_to_string(data.join("index.jsonl")).unwrap();
    assert!(index.ends_with('\n'), "no torn last line");
    for line in index.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).expect("every line parses");
        assert!(
            data.join(entry["path"].as_str().unwrap()).is_file(),
            "every line's file is there: {line}"
        );
    }

    // A restart on the full disk: it starts, sweeps, and leaves no temporary file behind.
    let (ok, stderr) = run(&data, "2");
    assert!(ok, "{stderr}");
    let mut stack = vec![data.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "left behind: {}", path.display());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }

    let out = sonde(&[
        "diff",
        "--data",
        data.to_str().unwrap(),
        "--base",
        "process.executable.name=cpu_split_disk_full",
        "--new",
        "version=disk-full",
        "--strict",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("burn_fifty"));
}
