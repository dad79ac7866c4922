//! End to end as root: `sonde run` profiles a workload with real BPF and ships OTLP profiles over gRPC to
//! an in-process tonic receiver on 127.0.0.1, which decodes the function names, the resource attributes
//! and the sample values; SIGTERM then stops the daemon cleanly.

use crate::common as bpf;
use crate::common::otlp as common;

use std::{sync::Arc, time::Duration};

use sonde::profile::otlp_proto::{
    collector::ExportProfilesServiceRequest, common::any_value::Value,
};

/// The value of resource attribute `key`.
fn attr(resource: &sonde::profile::otlp_proto::resource::Resource, key: &str) -> Option<Value> {
    resource
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

/// Function names of every sample of the resource whose `process.pid` is `pid`, with the sample values.
fn samples_of(
    request: &ExportProfilesServiceRequest,
    pid: i64,
) -> Vec<(Vec<String>, Vec<i64>, String)> {
    let d = request.dictionary.as_ref().unwrap();
    let mut out = Vec::new();
    for rp in &request.resource_profiles {
        let resource = rp.resource.as_ref().unwrap();
        let attr = |k: &str| attr(resource, k);
        if attr("process.pid") != Some(Value::IntValue(pid)) {
            continue;
        }
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                let ty = p
                    .sample_type
                    .as_ref()
                    .map(|t| d.string_table[t.type_strindex as usize].clone())
                    .unwrap_or_default();
                for s in &p.samples {
                    let names = d.stack_table[s.stack_index as usize]
                        .location_indices
                        .iter()
                        .flat_map(|&li| d.location_table[li as usize].lines.iter())
                        .map(|l| {
                            d.string_table
                                [d.function_table[l.function_index as usize].name_strindex as usize]
                                .clone()
                        })
                        .collect();
                    out.push((names, s.values.clone(), ty.clone()));
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_ships_tagged_otlp_profiles_of_a_real_workload() {
    bpf::require_root();
    let state = Arc::new(common::Received::default());
    let addr = common::start_receiver("127.0.0.1:0".parse().unwrap(), state.clone()).await;
    let bin = bpf::build_workload("cpu_split", "cpu_split_run", bpf::FP_FLAGS);
    let mut workload = bpf::spawn(&bin, &["60"]);
    let pid = workload.id();
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_sonde"))
        .args([
            "run",
            "--otlp-endpoint",
            &format!("http://{addr}"),
            "--export-interval",
            "2",
            "--label",
            "deployment.environment.name=e2e",
        ])
        .env("SONDE_LOG", "warn")
        .spawn()
        .unwrap();

    // Wait for a window that holds the workload.
    let mut found = Vec::new();
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        found = state
            .requests()
            .iter()
            .flat_map(|r| samples_of(r, i64::from(pid)))
            .collect();
        if found
            .iter()
            .any(|(names, _, _)| names.iter().any(|n| n == "burn_fifty"))
        {
            break;
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = daemon.wait().unwrap();
    workload.kill().unwrap();
    let _ = workload.wait();

    assert!(
        status.success(),
        "sonde run must exit 0 on SIGTERM, got {status}"
    );
    let requests = state.requests();
    assert!(!requests.is_empty(), "no request reached the receiver");
    for name in ["burn_fifty", "burn_thirty", "burn_twenty", "main"] {
        assert!(
            found.iter().any(|(n, _, _)| n.iter().any(|f| f == name)),
            "{name} missing from the workload's OTLP samples"
        );
    }
    // Sane values: sample counts are small positive integers, cpu values are counts x period.
    let counts: i64 = found
        .iter()
        .filter(|(_, _, ty)| ty == "samples")
        .flat_map(|(_, v, _)| v.iter())
        .sum();
    let cpu: i64 = found
        .iter()
        .filter(|(_, _, ty)| ty == "cpu")
        .flat_map(|(_, v, _)| v.iter())
        .sum();
    assert!(
        counts > 50,
        "expected > 50 samples of a busy process in 2 s windows, got {counts}"
    );
    assert_eq!(
        cpu,
        counts * (1_000_000_000 / 99),
        "cpu nanoseconds = samples x period"
    );
    // Resource attributes: host.name, static label, executable name.
    let resource = requests
        .iter()
        .flat_map(|r| &r.resource_profiles)
        .map(|rp| rp.resource.as_ref().unwrap())
        .find(|r| {
            r.attributes.iter().any(|kv| {
                kv.key == "process.pid"
                    && kv.value.as_ref().and_then(|v| v.value.clone())
                        == Some(Value::IntValue(i64::from(pid)))
            })
        })
        .expect("a resource for the workload");
    let attr = |k: &str| attr(resource, k);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(attr("host.name"), Some(Value::StringValue(host)));
    assert_eq!(
        attr("deployment.environment.name"),
        Some(Value::StringValue("e2e".into()))
    );
    assert_eq!(
        attr("process.executable.name"),
        Some(Value::StringValue("cpu_split_run".into()))
    );
    // The agent's heartbeat rides on every resource: identity and the window's coverage.
    assert_eq!(
        attr("sonde.agent.version"),
        Some(Value::StringValue(env!("CARGO_PKG_VERSION").into()))
    );
    for ratio in [
        "sonde.coverage.symbolized_frame_ratio",
        "sonde.coverage.complete_stack_ratio",
        "sonde.overhead.cpu_ratio",
    ] {
        match attr(ratio) {
            Some(Value::DoubleValue(x)) => assert!((0.0..=1.0).contains(&x), "{ratio} = {x}"),
            other => panic!("{ratio}: {other:?}"),
        }
    }
    match attr("sonde.window.samples") {
        Some(Value::IntValue(n)) => assert!(n > 0, "sonde.window.samples = {n}"),
        other => panic!("sonde.window.samples: {other:?}"),
    }
    // The footprint: at least the agent's own resident memory, which is megabytes.
    match attr("sonde.overhead.footprint_bytes") {
        Some(Value::IntValue(n)) => assert!(n > 8 << 20, "sonde.overhead.footprint_bytes = {n}"),
        other => panic!("sonde.overhead.footprint_bytes: {other:?}"),
    }
}
