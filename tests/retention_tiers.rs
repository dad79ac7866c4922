//! Retention tiers with time scaled down (a test "hour" of a few seconds): old windows merge into
//! hourly profiles whose totals are the sums of their windows, the last hourly profile of a release
//! outlives the hourly tier, the byte cap deletes oldest-first, and `sonde diff --data` reads across
//! tiers. `sonde prune` runs on a directory laid out by the test (the index contract of
//! export/local.rs, with timestamps in the past); the daemon applies the same policy after every window.

use crate::common;

use std::{
    collections::HashMap,
    io::Write as _,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::{SystemTime, UNIX_EPOCH},
};

use common::*;
use prost::Message as _;
use sonde::profile::pprof::proto;

const S: i64 = 1_000_000_000;

/// A cpu profile of one stack `main;leaf` with `samples` samples, and a comment of `pad` random bytes
/// (incompressible, to give the byte cap something to count).
fn profile(leaf: &str, samples: i64, start: i64, pad: usize) -> Vec<u8> {
    let mut seed = start as u64 ^ samples as u64;
    let noise: String = (0..pad)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            char::from(b'!' + (seed >> 58) as u8)
        })
        .collect();
    let strings = ["", "samples", "count", "main", leaf, &noise];
    let p = proto::Profile {
        string_table: strings.iter().map(|s| (*s).to_owned()).collect(),
        sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
        function: vec![
            proto::Function {
                id: 1,
                name: 3,
                ..Default::default()
            },
            proto::Function {
                id: 2,
                name: 4,
                ..Default::default()
            },
        ],
        location: (1..=2)
            .map(|id| proto::Location {
                id,
                line: vec![proto::Line {
                    function_id: id,
                    line: 0,
                }],
                ..Default::default()
            })
            .collect(),
        sample: vec![proto::Sample {
            location_id: vec![2, 1],
            value: vec![samples],
            label: vec![],
        }],
        time_nanos: start,
        duration_nanos: S,
        comment: vec![5],
        ..Default::default()
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

/// A data directory as `sonde run` lays it out, with windows at the given times (Unix seconds).
struct Layout {
    dir: PathBuf,
    index: String,
}

impl Layout {
    fn new(name: &str) -> Self {
        let dir = temp_dir(name).join("data");
        std::fs::create_dir_all(dir.join("profiles")).unwrap();
        for d in [&dir, &dir.join("profiles")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Self {
            dir,
            index: String::new(),
        }
    }

    fn window(&mut self, version: &str, start_s: i64, samples: i64, pad: usize) {
        let rel = format!("profiles/{start_s}/cpu-cart-{version}.pb.gz");
        let path = self.dir.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, profile("work", samples, start_s * S, pad)).unwrap();
        self.index.push_str(
            &serde_json::json!({
                "path": rel, "kind": "cpu",
                "start_unix_nanos": start_s * S, "end_unix_nanos": (start_s + 1) * S,
                "tags": {"service.name": "cart", "service.version": version},
            })
            .to_string(),
        );
        self.index.push('\n');
    }

    fn write_index(&self) {
        std::fs::write(self.dir.join("index.jsonl"), &self.index).unwrap();
    }
}

fn index_of(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("index.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn samples_of(dir: &Path, entry: &serde_json::Value) -> i64 {
    let p = read_indexed(dir, entry);
    p.sample.iter().map(|s| s.value[0]).sum()
}

fn prune(dir: &Path, config: &str) -> String {
    let cfg = dir.with_extension("toml");
    std::fs::write(&cfg, config).unwrap();
    let out = sonde(&[
        "prune",
        "--data",
        dir.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--test-retention-hour-secs",
        "10",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn old_windows_merge_and_releases_outlive_the_hourly_tier() {
    let now = now_s() / 10 * 10;
    let mut layout = Layout::new("retention_tiers");
    let mut expected: HashMap<(String, i64), i64> = HashMap::new();
    // Release 1: four "hours" of 10 s, long past hourly (300 s). Release 2: within hourly. Then recent.
    for (version, from) in [("1.0", now - 900), ("2.0", now - 200)] {
        for start in (from..from + 40).step_by(3) {
            let samples = 10 + start % 7;
            layout.window(version, start, samples, 0);
            *expected
                .entry((version.to_owned(), start.div_euclid(10) * 10))
                .or_default() += samples;
        }
    }
    for start in now - 5..now {
        layout.window("2.0", start, 5, 0);
    }
    layout.write_index();
    let policy = "[retention]\nrecent_secs = 100\nhourly_secs = 300\nper_release_secs = 100000\n\
                  per_release_keep = 1\nmax_mib = 64\n";
    let stdout = prune(&layout.dir, policy);
    assert!(stdout.contains("windows_merged=28"), "{stdout}");

    let index = index_of(&layout.dir);
    let hourly: Vec<&serde_json::Value> = index
        .iter()
        .filter(|e| e["path"].as_str().unwrap().starts_with("hourly/"))
        .collect();
    let windows = index.len() - hourly.len();
    assert_eq!(windows, 5, "recent windows stay: {index:#?}");
    // Release 2's four hours are within hourly; release 1 keeps only its last hour.
    let versions: Vec<&str> = hourly
        .iter()
        .map(|e| e["tags"]["service.version"].as_str().unwrap())
        .collect();
    assert_eq!(versions.iter().filter(|v| **v == "2.0").count(), 4);
    assert_eq!(versions.iter().filter(|v| **v == "1.0").count(), 1);
    for e in &hourly {
        let version = e["tags"]["service.version"].as_str().unwrap().to_owned();
        let hour = e["start_unix_nanos"].as_i64().unwrap() / S / 10 * 10;
        assert_eq!(
            samples_of(&layout.dir, e),
            expected[&(version.clone(), hour)],
            "the merged profile of {version} at {hour} sums its windows"
        );
        assert_eq!(e["tags"]["service.name"], "cart");
    }
    let kept_v1 = hourly
        .iter()
        .find(|e| e["tags"]["service.version"] == "1.0")
        .unwrap();
    assert_eq!(
        kept_v1["start_unix_nanos"].as_i64().unwrap() / S / 10 * 10,
        now - 870,
        "the release keeps its newest hour"
    );
    // Every file on disk is named by the index, and nothing else is left.
    let mut files = 0;
    for tier in ["profiles", "hourly"] {
        for d in std::fs::read_dir(layout.dir.join(tier)).unwrap() {
            files += std::fs::read_dir(d.unwrap().path()).unwrap().count();
        }
    }
    let named: std::collections::HashSet<&str> =
        index.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(files, named.len());

    // sonde diff reads across the tiers: release 1 (one hourly profile) against release 2.
    let out = sonde(&[
        "diff",
        "--data",
        layout.dir.to_str().unwrap(),
        "--base",
        "version=1.0",
        "--new",
        "version=2.0",
        "--strict",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("work"));

    // A second pass changes nothing.
    let again = prune(&layout.dir, policy);
    assert!(
        again.contains("windows_merged=0 hourly_written=0 expired=0 capped=0"),
        "{again}"
    );
}

#[test]
fn the_byte_cap_deletes_the_oldest_first() {
    let now = now_s();
    let mut layout = Layout::new("retention_cap");
    // 40 windows of ~40 KiB (incompressible comments): ~1.6 MiB against a 1 MiB cap.
    for start in now - 40..now {
        layout.window("1.0", start, 1, 48 << 10);
    }
    layout.write_index();
    let stdout = prune(&layout.dir, "[retention]\nmax_mib = 1\n");
    let capped: u64 = stdout
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("capped="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(capped > 0, "{stdout}");
    let index = index_of(&layout.dir);
    assert_eq!(index.len() as u64 + capped, 40);
    let oldest_left = index
        .iter()
        .map(|e| e["start_unix_nanos"].as_i64().unwrap() / S)
        .min()
        .unwrap();
    assert_eq!(oldest_left, now - 40 + capped as i64, "oldest went first");
    let mut bytes = 0;
    for d in std::fs::read_dir(layout.dir.join("profiles")).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            bytes += f.unwrap().metadata().unwrap().len();
        }
    }
    assert!(bytes <= 1 << 20, "{bytes} bytes on disk");
}

/// The daemon applies the tiers after every window: with a "hour" of 1 s and `recent` of 2 s, a 9 s run
/// leaves hourly profiles and only recent windows.
#[test]
fn the_daemon_applies_retention_every_window() {
    require_root();
    let dir = temp_dir("retention_daemon");
    let data = dir.join("data");
    let cfg = dir.join("sonde.toml");
    std::fs::write(&cfg, "[retention]\nrecent_secs = 2\n").unwrap();
    let bin = build_workload("cpu_split", "cpu_split_retention", FP_FLAGS);
    let _workload = Workload::start(&bin, &["30"]);
    let out = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--export-interval",
            "1",
            "--duration",
            "9",
            "--metrics-addr",
            "none",
            "--test-retention-hour-secs",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
        ])
        .env("SONDE_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("retention pass"), "{stderr}");
    let index = index_of(&data);
    let newest = index
        .iter()
        .map(|e| e["end_unix_nanos"].as_i64().unwrap())
        .max()
        .unwrap();
    let hourly = index
        .iter()
        .filter(|e| e["path"].as_str().unwrap().starts_with("hourly/"))
        .count();
    assert!(hourly > 0, "old windows merged: {index:#?}");
    for e in index
        .iter()
        .filter(|e| e["path"].as_str().unwrap().starts_with("profiles/"))
    {
        // Merged once their second ends 2 s before the last pass (one window before the end).
        assert!(
            newest - e["start_unix_nanos"].as_i64().unwrap() < 5 * S,
            "an old window was left: {e}"
        );
    }
    let workload: i64 = index
        .iter()
        .filter(|e| e["tags"]["process.executable.name"] == "cpu_split_retention")
        .map(|e| samples_of(&data, e))
        .sum();
    assert!(
        workload > 300,
        "about 8 s x 99 Hz kept across tiers: {workload}"
    );
}
