//! Every numeric setting out of its range is refused at start: a clear error naming the setting and
//! its range, a non-zero exit, and nothing loaded (the run ends before the "sonde running" or
//! "recording" line, within a second or two).

use crate::common;

use std::{
    path::Path,
    time::{Duration, Instant},
};

/// Runs `sonde ARGS` and checks it fails fast, before loading, with stderr naming `expect`.
fn refused(args: &[&str], expect: &str) {
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(args)
        .env("SONDE_LOG", "info")
        .output()
        .expect("running sonde");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "sonde {args:?} accepted an out-of-range value:\n{stderr}"
    );
    assert!(
        stderr.contains(expect),
        "sonde {args:?}: the error does not name {expect:?}:\n{stderr}"
    );
    assert!(
        !stderr.contains("sonde running") && !stderr.contains("recording"),
        "sonde {args:?} started before refusing:\n{stderr}"
    );
    assert!(
        took < Duration::from_secs(5),
        "sonde {args:?} took {took:?} to refuse"
    );
}

/// `sonde run` with `flags` and the config file `toml`.
fn run_refused(dir: &Path, toml: &str, flags: &[&str], expect: &str) {
    let config = dir.join(format!("c{}.toml", fastrand::u32(..)));
    std::fs::write(&config, toml).unwrap();
    let data = dir.join("data");
    let mut args = vec![
        "run",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--metrics-addr",
        "none",
    ];
    args.extend_from_slice(flags);
    refused(&args, expect);
}

#[test]
fn run_refuses_every_out_of_range_number() {
    common::require_root();
    let dir = common::temp_dir("config_ranges");
    let endpoint = "[otlp]\nendpoint = \"http://127.0.0.1:4317\"\n";
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        // Flags.
        (
            String::new(),
            vec!["--export-interval", "0"],
            "export_interval_secs",
        ),
        (
            String::new(),
            vec!["--export-interval", "18446744073709551615"],
            "between 1 and 3600 seconds",
        ),
        (String::new(), vec!["--spool-max-mib", "0"], "spool_max_mib"),
        (
            String::new(),
            vec!["--spool-max-mib", "99999999"],
            "spool_max_mib",
        ),
        (String::new(), vec!["--frequency", "0"], "--frequency"),
        (String::new(), vec!["--frequency", "100000"], "--frequency"),
        (
            String::new(),
            vec!["--offcpu-budget", "5000000"],
            "--offcpu-budget",
        ),
        (
            String::new(),
            vec!["--max-unwind-table-mib", "0"],
            "--max-unwind-table-mib",
        ),
        (String::new(), vec!["--duration", "0"], "--duration"),
        (
            String::new(),
            vec!["--duration", "99999999999"],
            "--duration",
        ),
        (
            String::new(),
            vec!["--debuginfod-timeout", "0"],
            "debuginfod-timeout",
        ),
        (
            String::new(),
            vec!["--debuginfod-cache-mib", "0"],
            "debuginfod-cache-mib",
        ),
        // The file.
        (
            "export_interval_secs = 86400\n".into(),
            vec![],
            "export_interval_secs",
        ),
        ("queue_capacity = 0\n".into(), vec![], "queue_capacity"),
        (
            "queue_capacity = 1000000\n".into(),
            vec![],
            "queue_capacity",
        ),
        ("spool_max_mib = 0\n".into(), vec![], "spool_max_mib"),
        (
            "spool_max_age_secs = 0\n".into(),
            vec![],
            "spool_max_age_secs",
        ),
        (
            format!("{endpoint}timeout_secs = 9223372036854775807\n"),
            vec![],
            "otlp.timeout_secs",
        ),
        (
            format!("{endpoint}timeout_secs = 0\n"),
            vec![],
            "otlp.timeout_secs",
        ),
        (
            format!("{endpoint}max_request_bytes = 1\n"),
            vec![],
            "otlp.max_request_bytes",
        ),
        (
            format!("{endpoint}max_request_bytes = 9223372036854775807\n"),
            vec![],
            "otlp.max_request_bytes",
        ),
        (
            "[metadata]\ncache_capacity = 0\n".into(),
            vec![],
            "metadata.cache_capacity",
        ),
        (
            "[status]\nlost_percent_bad = 250\n".into(),
            vec![],
            "status.lost_percent_bad",
        ),
        (
            "[symbols]\ndebuginfod_timeout_secs = 0\n".into(),
            vec![],
            "debuginfod_timeout_secs",
        ),
        (
            "[symbols]\ndebuginfod_cache_mib = 0\n".into(),
            vec![],
            "debuginfod_cache_mib",
        ),
        (
            "[symbols]\ndebuginfod_negative_ttl_secs = 99999999999\n".into(),
            vec![],
            "debuginfod_negative_ttl_secs",
        ),
        // A negative number where a count is expected is a type error naming the key.
        ("queue_capacity = -1\n".into(), vec![], "queue_capacity"),
    ];
    for (toml, flags, expect) in &cases {
        run_refused(&dir, toml, flags, expect);
    }
}

#[test]
fn record_refuses_every_out_of_range_number() {
    common::require_root();
    let out = common::temp_dir("config_ranges_record").join("out.pb.gz");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["--duration", "0"], "--duration"),
        (&["--duration", "999999999"], "--duration"),
        (&["--duration", "1", "--frequency", "0"], "--frequency"),
        (
            &["--duration", "1", "--offcpu-budget", "5000000"],
            "--offcpu-budget",
        ),
        (
            &[
                "--duration",
                "1",
                "--profile",
                "offcpu",
                "--min-block-us",
                "99999999999",
            ],
            "--min-block-us",
        ),
        (
            &["--duration", "1", "--max-unwind-table-mib", "99999"],
            "--max-unwind-table-mib",
        ),
        (
            &["--duration", "1", "--debuginfod-timeout", "0"],
            "debuginfod-timeout",
        ),
    ];
    for (flags, expect) in cases {
        let mut args = vec!["record", "--output", out];
        args.extend_from_slice(flags);
        refused(&args, expect);
    }
    assert!(
        !Path::new(out).exists(),
        "a refused recording wrote no output"
    );
}
