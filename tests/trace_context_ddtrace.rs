//! Trace and span ids on the samples of a real tracer: Datadog's `ddtrace` 4.16.0 for Python (from
//! PyPI, in the test peers' environment) publishes the OpenTelemetry thread context from its native
//! module, a library Python loads with dlopen. `traced_spans.py` runs two operations in spans of their
//! own and prints each span's ids; the samples inside each operation's function carry that span's
//! trace and span ids, and ddtrace's one attribute, named by its process context.

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
    let out = temp_dir("trace_context_ddtrace").join("spans.pb.gz");
    let summary = record_pid(traced.pid, "4", &[], &out);
    let profile = read_pprof(&out);
    let samples = resolve(&profile);
    let reported = traced.spans();
    let pid = i64::from(traced.pid);
    let theirs: Vec<&Resolved> = samples.iter().filter(|s| s.pid == pid).collect();
    for (function, op) in [("burn_checkout", "checkout"), ("burn_search", "search")] {
        let tally = tally(&theirs, function, &reported, op);
        eprintln!("{op}: {tally:?}");
        assert!(tally.samples >= 50, "{op}: {tally:?}\n{summary}");
        assert!(
            tally.labelled * 100 >= tally.samples * 80,
            "{op}: samples inside spans without their span: {tally:?}\n{summary}"
        );
        assert!(
            tally.right * 100 >= tally.labelled * 98,
            "{op}: samples with another span than theirs: {tally:?}"
        );
    }
    let outside: Vec<&&Resolved> = theirs
        .iter()
        .filter(|s| s.user().iter().any(|f| f.contains("burn_outside")))
        .collect();
    let labelled: i64 = outside
        .iter()
        .filter(|s| s.label("span_id").is_some())
        .map(|s| s.values[0])
        .sum();
    let all: i64 = outside.iter().map(|s| s.values[0]).sum();
    assert!(
        all > 0 && labelled * 100 <= all * 3,
        "{labelled} of {all} samples between spans carry a span"
    );
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
    assert!(
        summary_field(&summary, "trace_context_processes") >= 1.0,
        "{summary}"
    );
}
