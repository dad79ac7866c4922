//! Unwind tables outlive the agent: `sonde run` keeps each table it builds in `<data dir>/unwind-tables/
//! <build id>.rows`, and a second run on the same data directory loads them instead of parsing every
//! binary's `.eh_frame` again:
//! - the first run saves its tables (the frame-pointer-less workload's binary and libc among them);
//! - the second run builds none of the binaries already on disk (every table it built added a file,
//!   but for those never kept: binaries not root's alone, such as the vDSO's memfd), loads tables from
//!   disk (`unwind_tables_from_disk`), and the workload's samples of its first window reach a thread
//!   root (at least 90%).

use crate::common;
use crate::common::daemon::Daemon;
use std::{collections::BTreeSet, path::Path, time::Duration};

use common::*;

/// The saved tables' file names.
fn saved(data: &Path) -> BTreeSet<String> {
    std::fs::read_dir(data.join("unwind-tables"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".rows"))
                .collect()
        })
        .unwrap_or_default()
}

/// Counter `key` summed over the first `n` windows of a run whose log was `log`.
fn windows_sum(log: &Path, n: usize, key: &str) -> u64 {
    (0..n)
        .map(|i| daemon::window_figure(&daemon::json_log_of(log), i, key) as u64)
        .sum()
}

/// The first on-CPU profile of process `pid` in the data directory's index.
fn first_cpu_profile(data: &Path, pid: u32) -> sonde::profile::pprof::proto::Profile {
    let index = std::fs::read_to_string(data.join("index.jsonl")).unwrap();
    // Tags are strings.
    let pid_tag = pid.to_string();
    let entry = index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "cpu" && e["tags"]["process.pid"] == pid_tag.as_str())
        .unwrap_or_else(|| panic!("no on-CPU profile of pid {pid} in the index:\n{index}"));
    read_indexed(data, &entry)
}

#[test]
fn a_restarted_agent_loads_its_tables_from_the_data_directory() {
    require_root();
    let bin = build_workload("cpu_split", "cpu_split_saved", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["120"]);
    let dir = temp_dir("saved_tables");
    let data = dir.join("data");
    let args = [
        "--data-dir",
        data.to_str().unwrap(),
        "--export-interval",
        "2",
    ];

    let mut first = Daemon::start(&args, &dir.join("first.log"));
    first.wait_windows(2, Duration::from_secs(60));
    let (status, _, log) = first.stop();
    assert!(status.success(), "first run failed:\n{log}");
    let after_first = saved(&data);
    let built_first = windows_sum(&dir.join("first.log"), 2, "unwind_tables_built");
    eprintln!(
        "first run: {built_first} tables built, {} saved",
        after_first.len()
    );
    assert!(
        after_first.len() >= 2 && built_first >= 2,
        "the first run saved {} tables, built {built_first}:\n{log}",
        after_first.len()
    );

    // Only the second run's profiles in the index.
    std::fs::remove_file(data.join("index.jsonl")).unwrap();
    let mut second = Daemon::start(&args, &dir.join("second.log"));
    second.wait_windows(1, Duration::from_secs(60));
    let (status, _, log) = second.stop();
    assert!(status.success(), "second run failed:\n{log}");
    let after_second = saved(&data);
    let (built, from_disk, unkept) = (
        windows_sum(&dir.join("second.log"), 1, "unwind_tables_built"),
        windows_sum(&dir.join("second.log"), 1, "unwind_tables_from_disk"),
        windows_sum(&dir.join("second.log"), 1, "unwind_tables_not_kept"),
    );
    let added = after_second.difference(&after_first).count() as u64;
    // Tables that cannot be kept are built again, whichever run first saw their binary (this
    // host's own tool processes run from memfds, sampled in one run or the other); no other.
    eprintln!(
        "second run, first window: {built} tables built ({added} new files), {from_disk} from disk"
    );
    assert!(
        from_disk >= 2,
        "the second run loaded {from_disk} tables from disk:\n{log}"
    );
    assert!(
        built <= added + unkept,
        "the second run built {built} tables but saved only {added} new ones ({unkept} never kept): \
         a binary already on disk was rebuilt\n{log}"
    );

    let samples = resolve(&first_cpu_profile(&data, workload.pid()));
    let pid = i64::from(workload.pid());
    let (all, complete) = samples
        .iter()
        .filter(|s| s.pid == pid)
        .fold((0, 0), |(a, c), s| {
            (a + s.values[0], c + s.values[0] * i64::from(!s.truncated))
        });
    eprintln!("workload in the second run's first window: {complete} of {all} samples complete");
    assert!(
        all > 50,
        "only {all} samples of the workload in the first window"
    );
    assert!(
        complete as f64 >= 0.9 * all as f64,
        "{complete} of {all} samples of the workload reach a thread root in the second run's first \
         window"
    );
}
