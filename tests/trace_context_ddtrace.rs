//! Trace and span ids on the samples of a real tracer: Datadog's `ddtrace` 4.16.0 for Python (from
//! PyPI, in the test peers' environment) publishes the OpenTelemetry thread context from its native
//! module, a library Python loads with dlopen. `traced_spans.py` runs two operations in spans of their
//! own and prints each span's ids. Recorded by `sonde run` into a data directory: the samples inside
//! each operation's function carry that span's trace and span ids and ddtrace's one attribute, named
//! by its process context, and the process's tags take its service name from that context.

use std::process::Command;

use crate::common::{spans::*, *};

#[test]
fn ddtrace_spans_label_the_samples_inside_them() {
    require_root();
    let mut cmd = Command::new(python());
    cmd.arg(root().join("tests/workloads/python/traced_spans.py"))
        .arg("7")
        // No agent to send traces to, and nothing else on the network: spans only.
        .env("DD_TRACE_AGENT_URL", "http://127.0.0.1:9")
        .env("DD_SERVICE", "sonde-traced")
        .env("DD_INSTRUMENTATION_TELEMETRY_ENABLED", "false")
        .env("DD_REMOTE_CONFIGURATION_ENABLED", "false")
        .env("DD_TRACE_STARTUP_LOGS", "false");
    let mut traced = Traced::start("traced_spans.py", cmd);
    traced.first_span();
    let data = temp_dir("trace_context_ddtrace").join("sonde-data");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args(["run", "--export-interval", "3600", "--data-dir"])
        .arg(&data)
        .env("SONDE_LOG", "warn")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
    let index = std::fs::read_to_string(data.join("index.jsonl")).expect("index.jsonl written");
    let pid_tag = serde_json::json!(traced.pid.to_string());
    let entry = index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["tags"]["process.pid"] == pid_tag && e["kind"] == "cpu")
        .unwrap_or_else(|| panic!("no index entry for the traced process:\n{index}"));
    // DD_SERVICE, as ddtrace published it in its process context (not the executable's name).
    assert_eq!(entry["tags"]["service.name"], "sonde-traced", "{entry}");
    let samples = resolve(&read_indexed(&data, &entry));
    let reported = traced.spans();
    let pid = i64::from(traced.pid);
    let theirs: Vec<&Resolved> = samples.iter().filter(|s| s.pid == pid).collect();
    for (function, op) in [("burn_checkout", "checkout"), ("burn_search", "search")] {
        let tally = tally(&theirs, function, &reported, op);
        eprintln!("{op}: {tally:?}");
        assert!(tally.samples >= 50, "{op}: {tally:?}");
        assert!(
            tally.labelled * 100 >= tally.samples * 80,
            "{op}: samples inside spans without their span: {tally:?}"
        );
        assert!(
            tally.right * 100 >= tally.labelled * 98,
            "{op}: samples with another span than theirs: {tally:?}"
        );
    }
    assert_outside_spans(&theirs, "burn_outside", "traced_spans.py");
    // ddtrace's key map names its one attribute: the local root span, on every labelled sample.
    assert!(
        theirs
            .iter()
            .filter(|s| s.label("span_id").is_some())
            .all(|s| s
                .label("datadog.local_root_span_id")
                .is_some_and(|v| v.len() == 16)),
        "a labelled sample without ddtrace's local root span id"
    );
}
