//! An invalid configuration file fails before anything starts, with an error naming the key at fault:
//! an unknown key, a wrongly typed value, an out-of-range value and a bad endpoint.

use std::path::Path;

use sonde::config::{DaemonConfig, RunArgs};

fn error(text: &str) -> String {
    let err = DaemonConfig::merge(
        Some((Path::new("/etc/sonde.toml"), text)),
        &RunArgs::default(),
        &|_| None,
    )
    .expect_err("the config is invalid");
    err.to_string()
}

#[test]
fn unknown_key_is_named() {
    let msg = error("[otlp]\nendpoint = \"http://localhost:4317\"\ncompresion = \"gzip\"\n");
    assert!(msg.contains("otlp.compresion"), "{msg}");
    assert!(msg.contains("/etc/sonde.toml"), "{msg}");
}

#[test]
fn wrongly_typed_value_is_named() {
    let msg = error("export_interval_secs = \"ten\"\n");
    assert!(msg.contains("`export_interval_secs`"), "{msg}");
    let msg = error("[otlp]\ncompression = \"brotli\"\n");
    assert!(msg.contains("otlp.compression"), "{msg}");
}

#[test]
fn out_of_range_values_are_named() {
    assert!(error("export_interval_secs = 0\n").contains("export_interval_secs"));
    assert!(error("[otlp]\nendpoint = \"localhost:4317\"\n").contains("otlp.endpoint"));
    assert!(error("[metadata]\ncache_capacity = 0\n").contains("metadata.cache_capacity"));
}

#[test]
fn a_valid_file_loads() {
    let text = "export_interval_secs = 30\n[labels]\nenv = \"prod\"\n[otlp]\nendpoint = \"http://127.0.0.1:4317\"\ncompression = \"zstd\"\n";
    let c = DaemonConfig::merge(
        Some((Path::new("x.toml"), text)),
        &RunArgs::default(),
        &|_| None,
    )
    .unwrap();
    assert_eq!(c.export_interval.as_secs(), 30);
    assert_eq!(
        c.backends.otlp.unwrap().compression,
        sonde::export::otlp::Compression::Zstd
    );
}
