//! `sonde run`'s /metrics, /healthz and /readyz, read as an operator's tools read them (as root, real BPF):
//! - /readyz is 503 until a first window is delivered, then 200;
//! - every metric of the README's table is scraped with help and type by Prometheus' own parsers
//!   (prometheus_client, classic text and OpenMetrics);
//! - the sample counter equals the samples in the profiles written (within 1%);
//! - the overhead gauge is above 0 and below 5%;
//! - per service, a frame-pointer workload's stacks are complete and a stripped one's, walked by frame
//!   pointers, visibly less;
//! - `sonde status` prints every row, and exits non-zero when the symbolized ratio is under the
//!   configured threshold;
//! - /healthz and /readyz turn 503 once the sampling thread stops making windows (a test hook), and the
//!   stall is counted once (`sonde_pipeline_stalls_total`).

use crate::common;

use std::{
    io::Write as _,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::*;

/// GET `path` on `addr`: status and body.
fn get(addr: &str, path: &str, accept: &str) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    match agent
        .get(format!("http://{addr}{path}"))
        .header("Accept", accept)
        .call()
    {
        Ok(mut r) => (
            r.status().as_u16(),
            r.body_mut().read_to_string().unwrap_or_default(),
        ),
        Err(_) => (0, String::new()),
    }
}

/// Parses a scrape with tests/peers/parse_metrics.py.
fn parse(body: &str, mode: &str) -> serde_json::Value {
    let mut child = Command::new(python())
        .arg(root().join("tests/peers/parse_metrics.py"))
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python for the test peers (cargo xtask setup --peers)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client could not parse the {mode} scrape: {}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The metric names of the README's table.
fn documented() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("<!-- metrics-table")
        .expect("README metrics table");
    let end = readme.find("<!-- end metrics-table -->").unwrap();
    readme[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

/// The value of `family`'s sample whose labels include `labels`.
fn value(families: &serde_json::Value, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    families[family]["samples"]
        .as_array()?
        .iter()
        .find(|s| labels.iter().all(|(k, v)| s[1][*k] == *v))
        .and_then(|s| s[2].as_f64())
}

/// Waits until `cond` holds, up to `limit`.
fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// On-CPU samples in every profile written under `data`.
fn samples_written(data: &std::path::Path) -> i64 {
    let index = std::fs::read_to_string(data.join("index.jsonl")).unwrap();
    index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "cpu")
        .map(|e| {
            let p = read_indexed(data, &e);
            p.sample.iter().map(|s| s.value[0]).sum::<i64>()
        })
        .sum()
}

#[test]
fn metrics_health_and_status_tell_the_truth() {
    require_root();
    let work = temp_dir("metrics_endpoint");
    let fp = build_workload("cpu_split", "cpu_split_metrics_fp", FP_FLAGS);
    let stripped = build_workload(
        "cpu_split",
        "cpu_split_metrics_nofp",
        &["-O2", "-fomit-frame-pointer", "-s"],
    );
    let _w1 = Workload::start(&fp, &["120"]);
    let _w2 = Workload::start(&stripped, &["120"]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let data = work.join("data");
    const WINDOWS: u64 = 3;
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(["run", "--export-interval", "2", "--unwind", "fp"])
        .args(["--metrics-addr", &addr, "--debuginfod-urls", ""])
        .args(["--test-stall-after-windows", &WINDOWS.to_string()])
        .arg("--data-dir")
        .arg(&data)
        .env("SONDE_LOG", "warn")
        .spawn()
        .unwrap();

    // Not ready until a window is delivered (the first takes 2 s).
    wait_for(Duration::from_secs(30), "the endpoint", || {
        get(&addr, "/healthz", "*/*").0 != 0
    });
    assert_eq!(get(&addr, "/readyz", "*/*").0, 503);
    wait_for(Duration::from_secs(30), "/readyz 200", || {
        get(&addr, "/readyz", "*/*").0 == 200
    });
    assert_eq!(get(&addr, "/healthz", "*/*").0, 200);

    // After the last window: the counters are final.
    wait_for(Duration::from_secs(60), "every window delivered", || {
        let families = parse(&get(&addr, "/metrics", "text/plain").1, "prometheus");
        value(&families, "sonde_export_batches_sent", &[]) == Some(WINDOWS as f64)
    });
    let (_, text) = get(&addr, "/metrics", "text/plain");
    let (_, om) = get(&addr, "/metrics", "application/openmetrics-text");
    assert!(om.ends_with("# EOF\n"), "not OpenMetrics:\n{om}");
    let families = parse(&text, "prometheus");
    let om_families = parse(&om, "openmetrics");
    for name in documented() {
        let family = name.strip_suffix("_total").unwrap_or(&name);
        for (format, parsed) in [("prometheus", &families), ("openmetrics", &om_families)] {
            let f = &parsed[family];
            assert!(f.is_object(), "{name} missing from the {format} scrape");
            assert!(
                !f["help"].as_str().unwrap_or_default().is_empty(),
                "{name} has no help ({format})"
            );
            let expected = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            assert_eq!(f["type"], expected, "{name} ({format})");
        }
    }

    let counted = value(&families, "sonde_samples", &[("profile", "cpu")]).unwrap();
    let written = samples_written(&data) as f64;
    assert!(
        written > 100.0 && (counted - written).abs() <= 0.01 * written,
        "sonde_samples_total{{profile=\"cpu\"}} {counted} vs {written} samples written"
    );
    let overhead = value(&families, "sonde_overhead_cpu_ratio", &[]).unwrap();
    assert!(overhead > 0.0 && overhead < 0.05, "overhead {overhead}");
    let complete = |service: &str| {
        value(
            &families,
            "sonde_service_complete_stack_ratio",
            &[("service_name", service)],
        )
        .unwrap_or_else(|| panic!("no complete-stack gauge for {service}:\n{text}"))
    };
    let (fp_complete, stripped_complete) = (
        complete("cpu_split_metrics_fp"),
        complete("cpu_split_metrics_nofp"),
    );
    assert!(fp_complete >= 0.9, "frame-pointer workload {fp_complete}");
    assert!(
        stripped_complete < fp_complete - 0.3,
        "stripped workload {stripped_complete} vs {fp_complete}"
    );
    // BPF run time is on for the agent's lifetime, with no sysctl.
    assert!(
        families["sonde_bpf_program_run_seconds"]["samples"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s[2].as_f64() > Some(0.0))),
        "no BPF run time:\n{text}"
    );

    // sonde status: every row; exit 1 when symbolized frames are under the threshold.
    let status = |config: &str| {
        let path = work.join(format!("status-{}.toml", config.len()));
        std::fs::write(&path, config).unwrap();
        Command::new(env!("CARGO_BIN_EXE_sonde"))
            .args(["status", "--metrics-addr", &addr, "--config"])
            .arg(&path)
            .output()
            .unwrap()
    };
    let lenient = "[status]\nsymbolized_percent_suspect = 0\nsymbolized_percent_bad = 0\n\
                   complete_percent_suspect = 0\ncomplete_percent_bad = 0\n";
    let out = status(lenient);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    for row in [
        "profiler CPU overhead",
        "complete stacks",
        "symbolized frame ratio",
        "lost samples",
        "profile ingest lag",
        "oldest undelivered window",
        "local retention",
    ] {
        assert!(table.contains(row), "status lacks {row}:\n{table}");
    }
    assert!(out.status.success(), "{table}");
    let strict = "[status]\nsymbolized_percent_suspect = 100\nsymbolized_percent_bad = 99.99\n\
                  complete_percent_suspect = 0\ncomplete_percent_bad = 0\n";
    let out = status(strict);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!out.status.success(), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("symbolized frame ratio") && l.ends_with("smoking gun")),
        "{table}"
    );

    // The sampling thread has stopped making windows: not live after two intervals.
    wait_for(Duration::from_secs(15), "/healthz 503", || {
        get(&addr, "/healthz", "*/*").0 == 503
    });
    // A stalled agent is not ready either, and the watchdog counted the stall once.
    assert_eq!(get(&addr, "/readyz", "*/*").0, 503);
    wait_for(Duration::from_secs(5), "one stall counted", || {
        let families = parse(&get(&addr, "/metrics", "text/plain").1, "prometheus");
        value(&families, "sonde_pipeline_stalls", &[]) == Some(1.0)
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let exit = daemon.wait().unwrap();
    assert!(exit.success(), "sonde run exited {exit}");
}

#[test]
fn a_taken_port_is_an_error_before_anything_runs() {
    require_root();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let data = temp_dir("metrics_port_taken").join("data");
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(["run", "--duration", "10", "--metrics-addr", &addr])
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
    assert!(start.elapsed() < Duration::from_secs(8), "it ran anyway");
    assert!(!data.join("index.jsonl").exists(), "something was sampled");
}

#[test]
fn status_without_an_agent_says_so() {
    let out = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(["status", "--metrics-addr", "127.0.0.1:9"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no sonde agent answers"), "{stderr}");
}
