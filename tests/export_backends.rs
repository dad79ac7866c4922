//! As root with real BPF: `sonde run` ships one workload's windows to Pyroscope (Connect protocol,
//! with a tenant) and to Parca (gRPC) at once, each through its own exporter. The receivers are built
//! from the backends' vendored `.proto` files; each checks the label rules (`__name__`, `service_name`,
//! the static labels with dots turned to underscores, valid names, none twice), that every raw profile
//! is gzip pprof holding the workload's functions, and the exit line of each sink accounts for every
//! window (produced = delivered).

use crate::common as bpf;
use crate::common::{backends, daemon};

use std::{sync::Arc, time::Duration};

use daemon::{Daemon, exit_summary_of, field};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyroscope_and_parca_take_the_same_windows() {
    bpf::require_root();
    let pyroscope = Arc::new(backends::Received::default());
    let parca = Arc::new(backends::Received::default());
    let any = "127.0.0.1:0".parse().unwrap();
    let pyroscope_addr = backends::pyroscope_connect(any, pyroscope.clone()).await;
    let parca_addr = backends::parca(any, parca.clone()).await;
    let bin = bpf::build_workload("cpu_split", "cpu_split_backends", bpf::FP_FLAGS);
    let workload = bpf::Workload::start(&bin, &["60"]);
    let pid = workload.pid().to_string();
    let dir = bpf::temp_dir("export_backends");
    let config = dir.join("sonde.toml");
    std::fs::write(
        &config,
        format!(
            "[pyroscope]\nendpoint = \"http://{pyroscope_addr}\"\ntenant_id = \"team-a\"\n\
             [parca]\nendpoint = \"http://{parca_addr}\"\n[metadata]\nregion = \"eu-west-1\"\n"
        ),
    )
    .unwrap();
    let data = dir.join("data");
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--export-interval",
        "1",
        "--label",
        "service.version=2.4",
        "--data-dir",
        data.to_str().unwrap(),
        "--metrics-addr",
        "none",
    ];
    let mut run = Daemon::start(&args, &dir.join("run.log"));
    run.wait_windows(3, Duration::from_secs(60));
    // Let the last window's pushes land before the stop.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, _, log) = run.stop();
    assert!(status.success(), "sonde run exits 0 ({status}):\n{log}");

    for (sink, received) in [("pyroscope", &pyroscope), ("parca", &parca)] {
        let series = received.series();
        assert!(!series.is_empty(), "{sink} received nothing:\n{log}");
        backends::assert_valid_labels(&series);
        let ours: Vec<_> = series
            .iter()
            .filter(|s| s.label("process_pid") == Some(pid.as_str()))
            .collect();
        assert!(
            !ours.is_empty(),
            "{sink}: no series of the workload (pid {pid})"
        );
        for s in &ours {
            assert_eq!(
                s.label("__name__"),
                Some("process_cpu"),
                "{sink}: {:?}",
                s.labels
            );
            assert_eq!(
                s.label("process_executable_name"),
                Some("cpu_split_backends"),
                "{sink}: {:?}",
                s.labels
            );
            assert_eq!(
                s.label("service_version"),
                Some("2.4"),
                "{sink}: {:?}",
                s.labels
            );
            assert_eq!(
                s.label("cloud_region"),
                Some("eu-west-1"),
                "{sink}: {:?}",
                s.labels
            );
            assert!(s.label("host_name").is_some(), "{sink}: {:?}", s.labels);
            assert_eq!(
                s.sample_types(),
                ["samples/count", "cpu/nanoseconds"],
                "{sink}: what Pyroscope reads as process_cpu:samples:count and process_cpu:cpu:nanoseconds"
            );
        }
        let functions: Vec<String> = ours.iter().flat_map(|s| s.functions()).collect();
        for f in ["burn_fifty", "burn_thirty", "burn_twenty", "main"] {
            assert!(
                functions.iter().any(|n| n == f),
                "{sink}: {f} missing from the workload's profiles"
            );
        }
        let summary = exit_summary_of(&log, sink);
        let produced = field(&summary, "windows_produced", &log);
        assert!(produced >= 3, "{sink}: {produced} windows:\n{log}");
        assert_eq!(
            field(&summary, "windows_delivered", &log),
            produced,
            "{sink}: every window delivered:\n{log}"
        );
        assert_eq!(field(&summary, "windows_lost", &log), 0, "{sink}:\n{log}");
    }
    // The Connect receiver saw the tenant and the protocol's headers.
    let headers = pyroscope.headers.lock().unwrap().clone();
    assert_eq!(
        headers.get("x-scope-orgid").map(String::as_str),
        Some("team-a")
    );
    assert_eq!(
        headers.get("connect-protocol-version").map(String::as_str),
        Some("1")
    );
    // Profile ids are unique: no window was sent twice.
    let mut ids: Vec<_> = pyroscope.series().into_iter().map(|s| s.id).collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "a Pyroscope profile id repeats");
}
