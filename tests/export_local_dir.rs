//! Local data directory mode (no endpoint): each window becomes one gzip pack of readable pprof profiles
//! with the tags as `key=value` comments, and `index.jsonl` gets one line per profile in the contract's
//! exact shape, its `offset` and `length` tiling the pack's decompressed bytes.

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
        common::synthetic_tags("checkout").into(),
        common::synthetic_profile(),
    ));
    let outcome = sink.export(&batch).await.expect("local export");
    assert_eq!(outcome.requests, 1, "one file for the window");
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
    assert_eq!(lines.len(), 5, "one line per profile, appended per window");
    // Per file: its decompressed bytes and the bytes the lines cover.
    let mut files: std::collections::HashMap<String, (Vec<u8>, u64)> = Default::default();
    for line in &lines {
        let obj = line.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "end_unix_nanos",
                "kind",
                "length",
                "offset",
                "path",
                "start_unix_nanos",
                "tags"
            ],
            "exact contract keys"
        );
        assert!(matches!(obj["kind"].as_str(), Some("cpu" | "offcpu")));
        assert!(
            obj["start_unix_nanos"].as_i64().unwrap() < obj["end_unix_nanos"].as_i64().unwrap()
        );
        let rel = obj["path"].as_str().unwrap();
        assert!(!rel.starts_with('/'), "path relative to DIR: {rel}");
        assert!(rel.ends_with(".pprofs.gz"), "a pack: {rel}");
        let (raw, covered) = files.entry(rel.to_owned()).or_insert_with(|| {
            let mut raw = Vec::new();
            flate2::read::GzDecoder::new(std::fs::File::open(dir.path().join(rel)).unwrap())
                .read_to_end(&mut raw)
                .unwrap();
            (raw, 0)
        });
        let (offset, length) = (
            obj["offset"].as_u64().unwrap() as usize,
            obj["length"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            offset as u64, *covered,
            "profiles follow each other: {line}"
        );
        *covered += length as u64;
        let raw = &raw[offset..offset + length];
        let pprof = proto::Profile::decode(raw).expect("a valid pprof");
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
    // One file per window (the third window, in the same second as the first, gets its own), each
    // wholly covered by its lines.
    assert_eq!(files.len(), 3, "{:?}", files.keys());
    for (rel, (raw, covered)) in &files {
        assert_eq!(
            *covered,
            raw.len() as u64,
            "{rel} holds its profiles and nothing else"
        );
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
