//! As root with real BPF: Pyroscope over gRPC is down for the first windows of `sonde run`, then comes
//! up on the same port. Every window arrives exactly once: the ones of the outage from the disk spool
//! (`<data-dir>/spool-pyroscope`), the later ones live; none is lost, none sent twice (profile ids
//! are derived from the window's batch id and unique per profile), and the sink's exit line and
//! counters agree with what arrived.

use crate::common as bpf;
use crate::common::{backends, daemon, otlp};

use std::{
    collections::BTreeSet,
    sync::Arc,
    time::{Duration, Instant},
};

use daemon::{Daemon, exit_summary_of, field};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyroscope_windows_of_an_outage_arrive_once() {
    bpf::require_root();
    let bin = bpf::build_workload("cpu_split", "cpu_split_pyro_outage", bpf::FP_FLAGS);
    let _workload = bpf::Workload::start(&bin, &["120"]);
    let dir = bpf::temp_dir("pyroscope_outage");
    let data = dir.join("data");
    let addr = otlp::free_port();
    let endpoint = format!("http://{addr}");
    let args = [
        "--pyroscope-endpoint",
        &endpoint,
        "--pyroscope-protocol",
        "grpc",
        "--export-interval",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
        "--metrics-addr",
        "none",
    ];
    let mut run = Daemon::start(&args, &dir.join("run.log"));
    // Three windows with nothing listening: the first stays in flight (retried), the later ones go to
    // the spool once the backend counts as failing.
    run.wait_windows(3, Duration::from_secs(60));
    let spooled_dir = data.join("spool-pyroscope");
    let spooled = std::fs::read_dir(&spooled_dir)
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(
        spooled >= 1,
        "the outage's windows wait in {}:\n{}",
        spooled_dir.display(),
        run.log()
    );

    let received = Arc::new(backends::Received::default());
    backends::pyroscope_grpc(addr, received.clone()).await;
    // Until the spool is drained and two more windows came live.
    let windows_at_up = run.windows();
    run.wait_windows(windows_at_up + 2, Duration::from_secs(60));
    let end = Instant::now() + Duration::from_secs(30);
    while std::fs::read_dir(&spooled_dir)
        .map(|d| d.count())
        .unwrap_or(0)
        > 0
    {
        assert!(
            Instant::now() < end,
            "the spool did not drain:\n{}",
            run.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _, log) = run.stop();
    assert!(status.success(), "sonde run exits 0 ({status}):\n{log}");

    let series = received.series();
    backends::assert_valid_labels(&series);
    let summary = exit_summary_of(&log, "pyroscope");
    let produced = field(&summary, "windows_produced", &log);
    assert_eq!(field(&summary, "windows_lost", &log), 0, "{log}");
    assert_eq!(
        field(&summary, "windows_spooled", &log),
        0,
        "all replayed before the stop:\n{log}"
    );
    assert_eq!(
        field(&summary, "windows_delivered", &log),
        produced,
        "{log}"
    );
    let spooled = field(&summary, "sonde_export_spooled_batches_total", &log);
    assert!(
        spooled >= 2,
        "the outage's windows went to the spool:\n{log}"
    );
    assert_eq!(
        field(&summary, "sonde_export_replayed_batches_total", &log),
        spooled,
        "and every one was replayed:\n{log}"
    );
    // Each window arrives once: one window start per window, no profile id twice.
    let windows: BTreeSet<i64> = series.iter().map(|s| s.profile.time_nanos).collect();
    assert_eq!(
        windows.len() as u64,
        produced,
        "every window arrives (each holds the busy workload): {windows:?}\n{log}"
    );
    let ids: Vec<&str> = series.iter().map(|s| s.id.as_str()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "a profile arrived twice");
    assert!(
        series
            .iter()
            .flat_map(|s| s.functions())
            .any(|f| f == "burn_fifty"),
        "the workload's functions arrive"
    );
}
