//! Local data directory mode (no endpoint): each profile of a window becomes a readable gzip pprof with the
//! tags as `key=value` comments, and `index.jsonl` gets one line per file in the contract's exact shape.

use crate::common::otlp as common;

use std::io::Read as _;

use prost::Message as _;
use sonde::{
    export::{ExportMetrics, Sink as _, local::LocalDirSink},
    profile::{ProfileKind, pprof::proto},
};

#[tokio::test]
async fn writes_pprof_files_and_a_correct_index() {
    let dir = tempfile::tempdir().unwrap();
    let sink = LocalDirSink::open(dir.path(), Default::default()).unwrap();
    let mut batch = common::batch("cart", 0);
    let (tags, mut offcpu) = batch.profiles[0].clone();
    offcpu.kind = ProfileKind::OffCpu;
    batch.profiles.push((tags, offcpu));
    batch.profiles.push((
        common::synthetic_tags("checkout"),
        common::synthetic_profile(),
    ));
    let outcome = sink.export(&batch).await.expect("local export");
    assert_eq!(outcome.requests, 3);
    sink.export(&common::batch("cart", 1))
        .await
        .expect("second window");
    // A window starting in the same second as the first must not overwrite its file.
    let mut same_second = common::batch("cart", 0);
    same_second.start_unix_nanos += 1;
    sink.export(&same_second).await.expect("third window");

    let index = std::fs::read_to_string(dir.path().join("index.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = index
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 5, "one line per file, appended per window");
    let mut paths = std::collections::HashSet::new();
    for line in &lines {
        let obj = line.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            ["end_unix_nanos", "kind", "path", "start_unix_nanos", "tags"],
            "exact contract keys"
        );
        assert!(matches!(obj["kind"].as_str(), Some("cpu" | "offcpu")));
        assert!(
            obj["start_unix_nanos"].as_i64().unwrap() < obj["end_unix_nanos"].as_i64().unwrap()
        );
        let rel = obj["path"].as_str().unwrap();
        assert!(!rel.starts_with('/'), "path relative to DIR: {rel}");
        assert!(
            paths.insert(rel.to_owned()),
            "distinct file per profile: {rel}"
        );

        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(dir.path().join(rel)).unwrap())
            .read_to_end(&mut raw)
            .unwrap();
        let pprof = proto::Profile::decode(raw.as_slice()).expect("a valid pprof");
        let strings = &pprof.string_table;
        let comments: Vec<&str> = pprof
            .comment
            .iter()
            .map(|&i| strings[i as usize].as_str())
            .collect();
        let service = obj["tags"]["service.name"].as_str().unwrap();
        assert!(
            comments.contains(&format!("service.name={service}").as_str()),
            "{comments:?}"
        );
        assert!(comments.contains(&"host.name=node-1"), "{comments:?}");
        assert!(
            strings.iter().any(|s| s == "compute_checksum"),
            "function names in the pprof"
        );
        let total: i64 = pprof.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(total, 42);
    }
    assert_eq!(lines[0]["tags"]["service.version"], "1.4.2");
    assert_eq!(lines[0]["start_unix_nanos"].as_i64(), Some(common::T0));
    assert_eq!(lines[1]["kind"], "offcpu");
    // No temporary files are left behind.
    let leftovers = walk(dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tmp"))
        .count();
    assert_eq!(leftovers, 0);
    let _ = ExportMetrics::default();
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
