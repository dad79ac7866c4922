//! Selecting profiles from the local data directory by tags and time (the `sonde run` index contract).

use crate::common::diff_fixtures as fixtures;

use std::path::PathBuf;

use fixtures::{Kind, diff_json, num, profile, row, scratch, stack};

const HOUR: i64 = 3_600_000_000_000;
const T0: i64 = 1_767_225_600_000_000_000; // 2026-01-01T00:00:00Z

/// A data dir: checkout 2.3 on two hosts, checkout 2.4 twice (hour 0 and hour 2), billing 2.4, and an
/// off-CPU profile of checkout 2.4. Only checkout's `slow` grows from 2.3 to 2.4.
fn data_dir(name: &str) -> PathBuf {
    let dir = scratch(name);
    let mut index = String::new();
    let mut add = |file: &str, kind: Kind, hour: i64, tags: &str, slow: i64| {
        let p = profile(
            kind,
            3600.0,
            &[stack("main;slow", slow), stack("main;fast", 1_000 - slow)],
        );
        fixtures::write(&dir.join(file), &p);
        let kind = match kind {
            Kind::OffCpu => "offcpu",
            _ => "cpu",
        };
        let (start, end) = (T0 + hour * HOUR, T0 + (hour + 1) * HOUR);
        index.push_str(&format!(
            r#"{{"path":"{file}","kind":"{kind}","start_unix_nanos":{start},"end_unix_nanos":{end},"tags":{{{tags}}}}}"#
        ));
        index.push('\n');
    };
    let checkout = |v: &str, host: &str| {
        format!(
            r#""service.name":"checkout","service.version":"{v}","host.name":"{host}","k8s.pod.name":"checkout-{host}""#
        )
    };
    add("a.pb.gz", Kind::Cpu, 0, &checkout("2.3", "a"), 100);
    add("b.pb.gz", Kind::Cpu, 0, &checkout("2.3", "b"), 100);
    add("c.pb.gz", Kind::Cpu, 0, &checkout("2.4", "a"), 300);
    add("d.pb.gz", Kind::Cpu, 2, &checkout("2.4", "a"), 500);
    add(
        "e.pb.gz",
        Kind::Cpu,
        0,
        r#""service.name":"billing","service.version":"2.4""#,
        900,
    );
    add("f.pb.gz", Kind::OffCpu, 0, &checkout("2.4", "a"), 700);
    std::fs::write(dir.join("index.jsonl"), index).unwrap();
    dir
}

fn run(dir: &PathBuf, extra: &[&str]) -> serde_json::Value {
    let mut args: Vec<std::ffi::OsString> = vec!["--data".into(), dir.into()];
    args.extend(extra.iter().map(Into::into));
    diff_json(args).0
}

#[test]
fn selects_by_tags_merging_files_of_one_side() {
    let dir = data_dir("datadir_tags");
    let json = run(
        &dir,
        &[
            "--base",
            "service=checkout",
            "version=2.3",
            "--new",
            "service=checkout",
            "version=2.4",
        ],
    );
    assert_eq!(
        json["totals"]["base"]["files"], 2,
        "both 2.3 hosts merged: {json}"
    );
    assert_eq!(
        json["totals"]["new"]["files"], 2,
        "both 2.4 cpu captures, not billing, not off-CPU: {json}"
    );
    let (rank, slow) = row(&json, "slow");
    assert!(rank <= 1, "slow and fast tie at 30 points: {json}");
    assert!((num(slow, "delta_self_pct") - 30.0).abs() < 1e-9, "{slow}");
    assert_eq!(num(slow, "base_self_pct"), 10.0);
    assert_eq!(num(slow, "new_self_pct"), 40.0);
}

#[test]
fn time_window_keeps_overlapping_captures() {
    let dir = data_dir("datadir_time");
    // Only the hour-2 capture of 2.4 overlaps [01:30, end); 2.3 has nothing there, so compare to all of 2.3
    // by giving the base its own window through a second run.
    let json = run(
        &dir,
        &[
            "--base",
            "version=2.4",
            "host=a",
            "--new",
            "version=2.4",
            "host=a",
            "--since",
            "2026-01-01T01:30:00Z",
        ],
    );
    assert_eq!(num(row(&json, "slow").1, "new_self_pct"), 50.0, "{json}");
    assert_eq!(
        num(row(&json, "slow").1, "base_self_pct"),
        50.0,
        "--since applies to both sides: {json}"
    );
    let json = run(
        &dir,
        &[
            "--base",
            "version=2.4",
            "host=a",
            "--new",
            "version=2.4",
            "host=a",
            "--until",
            "1767229200",
        ],
    );
    assert_eq!(
        num(row(&json, "slow").1, "new_self_pct"),
        30.0,
        "--until in Unix seconds keeps hour 0: {json}"
    );
}

#[test]
fn exact_keys_and_off_cpu_kind() {
    let dir = data_dir("datadir_exact");
    let json = run(
        &dir,
        &[
            "--base",
            "k8s.pod.name=checkout-a",
            "--new",
            "pod=checkout-a",
            "service.version=2.4",
            "--sample-type",
            "offcpu",
        ],
    );
    assert_eq!(json["sample_type"], "offcpu/nanoseconds", "{json}");
    assert_eq!(json["totals"]["new"]["files"], 1);
    assert_eq!(num(row(&json, "slow").1, "new_self_pct"), 70.0, "{json}");
}
