//! An independent OTLP receiver, tests/peers/otlp_receiver.py (grpcio + the PyPI opentelemetry-proto package,
//! profiles layout v1.10), accepts what sonde sends and decodes function names, resource attributes and
//! values through the dictionary. Needs the packages of tests/peers/requirements.txt; the interpreter is
//! `$SONDE_TEST_PYTHON`, else `.venv-peers/bin/python` at the repository root when present, else `python3`.

use crate::common::otlp as common;

use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    sync::Arc,
};

use sonde::export::{
    ExportMetrics, Sink as _,
    otlp::{OtlpConfig, OtlpSink},
};

#[tokio::test]
async fn python_receiver_decodes_what_sonde_sends() {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv-peers/bin/python");
    let python = std::env::var("SONDE_TEST_PYTHON").unwrap_or_else(|_| {
        if std::path::Path::new(venv).exists() {
            venv.into()
        } else {
            "python3".into()
        }
    });
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/peers/otlp_receiver.py"
    );
    let mut child = Command::new(&python)
        .args([script, "--requests", "1", "--timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {python}: {e}; install the peers (tests/peers/requirements.txt)")
        });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let port = first.strip_prefix("PORT ").unwrap_or_else(|| {
        panic!(
            "the Python receiver did not start (got {first:?}); run `pip install -r tests/peers/requirements.txt` \
             and set SONDE_TEST_PYTHON to that interpreter"
        )
    });

    let sink = OtlpSink::new(
        OtlpConfig::new(format!("http://127.0.0.1:{port}")),
        Arc::new(ExportMetrics::default()),
    )
    .unwrap();
    sink.export(&common::batch("cart", 0))
        .await
        .expect("the Python receiver accepts the request");

    let decoded: serde_json::Value = serde_json::from_str(
        &lines
            .next()
            .and_then(Result::ok)
            .expect("one decoded request"),
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "receiver exit status {status}");

    let resource = &decoded["resources"][0];
    assert_eq!(resource["attributes"]["host.name"], "node-1");
    assert_eq!(resource["attributes"]["service.name"], "cart");
    assert_eq!(resource["attributes"]["team"], "core");
    let profiles = resource["profiles"].as_array().unwrap();
    let cpu = profiles
        .iter()
        .find(|p| p["sample_type"] == "cpu")
        .expect("cpu profile");
    assert_eq!(cpu["unit"], "nanoseconds");
    assert_eq!(cpu["scope"], "sonde");
    let samples = cpu["samples"].as_array().unwrap();
    let checksum = samples
        .iter()
        .find(|s| s["functions"][0] == "compute_checksum")
        .unwrap_or_else(|| panic!("no compute_checksum leaf in {samples:?}"));
    assert_eq!(
        checksum["functions"],
        serde_json::json!(["compute_checksum", "handle_request", "main"])
    );
    assert_eq!(checksum["values"], serde_json::json!([300_000_000]));
    assert_eq!(checksum["attributes"]["thread.name"], "cart-worker");
    assert_eq!(checksum["attributes"]["process.pid"], 4242);
}
