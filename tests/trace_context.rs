//! Trace and span ids on samples, from the OpenTelemetry thread context (OTEP 4947): a C program
//! written from the OTEP (`thread_ctx.c`) runs spans in two threads and prints each span's ids. It
//! is built four ways, all recorded at once: the variable in the program and in a library loaded
//! with dlopen after the threads started, each with glibc (TLSDESC: static TLS) and musl (the
//! traditional dialect: the thread's DTV). Every sample inside a span must carry that span's ids and
//! the attribute the process context names (`span_name`); none outside a span may carry any.

use std::process::Command;

use crate::common::{spans::*, *};

/// Seconds each program runs: it must outlive the recording.
const RUN: &str = "6";

#[test]
fn samples_inside_spans_carry_their_trace_and_span_with_glibc_and_musl() {
    require_root();
    let program = |cc: &str, out: &str, flags: &[&str]| {
        let mut all = FP_FLAGS.to_vec();
        all.extend_from_slice(flags);
        build_workload_with(cc, "thread_ctx", out, &all)
    };
    let library = |cc: &str, out: &str, flags: &[&str]| {
        let mut all = vec!["-O1", "-shared", "-fPIC"];
        all.extend_from_slice(flags);
        build_workload_with(cc, "thread_ctx_lib", out, &all)
    };
    let in_program = ["-DCTX_IN_PROGRAM", "-rdynamic"];
    let glibc_program = program("gcc", "tc_glibc_program", &in_program);
    let glibc_loader = program("gcc", "tc_glibc_loader", &[]);
    let glibc_lib = library("gcc", "libtc_glibc.so", &["-mtls-dialect=gnu2"]);
    let musl_program = program("musl-gcc", "tc_musl_program", &in_program);
    let musl_loader = program("musl-gcc", "tc_musl_loader", &[]);
    let musl_lib = library("musl-gcc", "libtc_musl.so", &[]);

    let run = |program: &std::path::Path, lib: Option<&std::path::Path>| {
        let mut cmd = Command::new(program);
        cmd.arg(RUN).args(lib);
        cmd
    };
    let mut traced = [
        Traced::start("glibc, in the program", run(&glibc_program, None)),
        Traced::start("glibc, in a library", run(&glibc_loader, Some(&glibc_lib))),
        Traced::start("musl, in the program", run(&musl_program, None)),
        Traced::start("musl, in a library", run(&musl_loader, Some(&musl_lib))),
    ];
    for t in &mut traced {
        t.first_span();
    }
    let dir = temp_dir("trace_context");
    let out = dir.join("spans.pb.gz");
    let pids: Vec<String> = traced.iter().map(|t| t.pid.to_string()).collect();
    let mut args = vec!["record", "--duration", "3"];
    for pid in &pids {
        args.extend_from_slice(&["--pid", pid]);
    }
    args.extend_from_slice(&["--output", out.to_str().unwrap(), "--summary-json", "-"]);
    let summary = sonde_ok(&args);
    let samples = resolve(&read_pprof(&out));

    for t in &mut traced {
        let reported = t.spans();
        let pid = i64::from(t.pid);
        let theirs: Vec<&Resolved> = samples.iter().filter(|s| s.pid == pid).collect();
        for (function, op) in [("in_span_alpha", "alpha"), ("in_span_beta", "beta")] {
            let tally = tally(&theirs, function, &reported, op);
            assert!(tally.samples >= 20, "{}: {op}: {tally:?}", t.name);
            assert!(
                tally.labelled * 100 >= tally.samples * 95,
                "{}: {op}: samples inside spans without their span: {tally:?}\n{summary}",
                t.name
            );
            assert!(
                tally.right * 100 >= tally.labelled * 98,
                "{}: {op}: samples with another span than their thread's: {tally:?}",
                t.name
            );
            let named = theirs
                .iter()
                .filter(|s| s.user().first() == Some(&function) && s.label("trace_id").is_some())
                .all(|s| s.label("span_name") == Some(op));
            assert!(
                named,
                "{}: {op}: a span without its span_name attribute",
                t.name
            );
        }
        assert_outside_spans(&theirs, "outside_span", t.name);
    }
    assert!(
        summary_field(&summary, "trace_context_processes") >= 4.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "trace_context_labeled") > 0.0,
        "{summary}"
    );
}
