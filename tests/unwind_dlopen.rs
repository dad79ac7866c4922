//! A library loaded after sampling started (`dlopen`, built without frame pointers) is unwound once its
//! table is built: `sonde run` with 1 s windows, and every window that starts 2 s after the load has
//! at least 95% of the library's samples reaching `main`.

use crate::common;
use std::{io::BufRead as _, time::Duration};

use common::*;

#[test]
fn frames_of_a_library_loaded_later_are_complete_within_two_seconds() {
    require_root();
    let lib = build_library("late_lib", "libsonde_late.so", NOFP_FLAGS);
    let bin = build_workload("dlopen_late", "dlopen_late_nofp", NOFP_FLAGS);
    let data = temp_dir("unwind_dlopen").join("data");
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args([
            "run",
            "--export-interval",
            "1",
            "--duration",
            "12",
            "--data-dir",
        ])
        .arg(&data)
        .env("SONDE_LOG", "warn")
        .spawn()
        .unwrap();
    // The library is loaded 3 s into the run: the process is known (and its first tables built) well
    // before, so only a refresh of its mappings can bring the library's table in.
    std::thread::sleep(Duration::from_secs(1));
    let mut workload = std::process::Command::new(&bin)
        .args([lib.to_str().unwrap(), "3", "8"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = workload.id();
    let mut line = String::new();
    std::io::BufReader::new(workload.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let loaded: i64 = line
        .strip_prefix("loaded ")
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("workload printed {line:?}"));
    let status = daemon.wait().unwrap();
    let _ = workload.kill();
    let _ = workload.wait();
    assert!(status.success(), "sonde run exited with {status}");

    let index = std::fs::read_to_string(data.join("index.jsonl")).expect("index.jsonl");
    let (mut checked, mut late_total, mut late_complete) = (0, 0i64, 0i64);
    for entry in index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
    {
        let start = entry["start_unix_nanos"].as_i64().unwrap();
        if entry["kind"] != "cpu"
            || entry["tags"]["process.pid"] != serde_json::json!(pid.to_string())
            || start < loaded + 2_000_000_000
        {
            continue;
        }
        let samples = resolve(&read_indexed(&data, &entry));
        let window_total = inclusive(&samples, pid, "late_burn", 0);
        if window_total == 0 {
            continue;
        }
        let complete: i64 = samples
            .iter()
            .filter(|s| s.functions.iter().any(|f| f == "late_burn"))
            .filter(|s| {
                ["late_entry", "call_late", "main"]
                    .iter()
                    .all(|f| s.functions.iter().any(|g| g == f))
            })
            .map(|s| s.values[0])
            .sum();
        eprintln!(
            "window at +{:.1}s: {complete}/{window_total}",
            (start - loaded) as f64 / 1e9
        );
        assert!(
            complete as f64 >= 0.95 * window_total as f64,
            "window starting {:.1} s after the load: {complete} of {window_total} samples complete",
            (start - loaded) as f64 / 1e9
        );
        checked += 1;
        late_total += window_total;
        late_complete += complete;
    }
    assert!(
        checked >= 3,
        "only {checked} windows after load + 2 s had samples of the library"
    );
    eprintln!("{late_complete}/{late_total} complete over {checked} windows");
}
