//! The pprof decodes with an independent decoder (Python protobuf with the public profile.proto) and has
//! the specified sample types, period type, labels and location order.

use crate::common;
use common::*;

#[test]
fn independent_decoder_reads_types_labels_and_leaf_first_locations() {
    require_root();
    let bin = build_workload("cpu_split", "cpu_split_fmt", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let dir = temp_dir("format");
    let out = dir.join("profile.pb.gz");
    record_pid(pid, "2", &[], &out);
    drop(workload);

    let decoded = std::process::Command::new(python())
        .arg(root().join("tests/peers/decode_pprof.py"))
        .arg(root().join("proto"))
        .arg(&out)
        .output()
        .expect("python for the test peers (cargo xtask setup --peers)");
    assert!(
        decoded.status.success(),
        "decoder failed: {}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    let json = String::from_utf8(decoded.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["sample_types"],
        serde_json::json!([["samples", "count"], ["cpu", "nanoseconds"]])
    );
    assert_eq!(v["period_type"], serde_json::json!(["cpu", "nanoseconds"]));
    assert_eq!(v["period"], serde_json::json!(1_000_000_000 / 99));
    let samples = v["samples"].as_array().unwrap();
    assert!(!samples.is_empty());
    for s in samples {
        assert_eq!(s["labels"]["pid"], serde_json::json!(pid), "{s}");
        assert_eq!(
            s["labels"]["comm"],
            serde_json::json!("cpu_split_fmt"),
            "{s}"
        );
        assert_eq!(
            s["values"][1].as_i64().unwrap(),
            s["values"][0].as_i64().unwrap() * (1_000_000_000 / 99)
        );
    }
    // Leaf first: a burn_* function comes before main, which comes before the libc entry.
    let burn = samples
        .iter()
        .find(|s| {
            s["functions"]
                .as_array()
                .unwrap()
                .first()
                .is_some_and(|f| f.as_str().unwrap().starts_with("burn_"))
        })
        .expect("a sample whose leaf is a burn_* function");
    let names: Vec<&str> = burn["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let at = |n: &str| {
        names
            .iter()
            .position(|f| *f == n)
            .unwrap_or_else(|| panic!("{n} missing from {names:?}"))
    };
    assert!(
        at("main") > 0 && at("__libc_start_call_main") > at("main"),
        "{names:?}"
    );
    // Mappings carry build ids (gcc on Debian emits them).
    assert!(
        v["mappings"]
            .as_array()
            .unwrap()
            .iter()
            .any(
                |m| m["filename"].as_str().unwrap().ends_with("cpu_split_fmt")
                    && m["build_id"].as_str().unwrap().len() == 40
            ),
        "{}",
        v["mappings"]
    );
}
