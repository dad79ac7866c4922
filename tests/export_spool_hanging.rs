//! A backend that accepts connections and never answers, as root with real BPF: each RPC hits its
//! deadline (`otlp.timeout_secs = 1`) and is retried, windows go to the spool instead of being lost,
//! the stop does not wait on the dead backend, and the exit line adds up: produced = spooled, none
//! delivered, none lost.

use crate::common as bpf;
use crate::common::daemon;

use std::{io::Write as _, net::TcpListener, time::Duration};

use daemon::{Daemon, exit_summary, field, spool_files};

#[test]
fn a_hanging_backend_costs_no_window() {
    bpf::require_root();
    let bin = bpf::build_workload("cpu_split", "cpu_split_hang", bpf::FP_FLAGS);
    let _workload = bpf::Workload::start(&bin, &["120"]);
    // Accepts every connection and holds it open without reading or writing a byte.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
        }
    });
    let dir = bpf::temp_dir("spool_hanging");
    let data = dir.join("data");
    let config = dir.join("sonde.toml");
    let mut f = std::fs::File::create(&config).unwrap();
    writeln!(f, "[otlp]\nendpoint = \"http://{addr}\"\ntimeout_secs = 1").unwrap();

    let mut run = Daemon::start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--export-interval",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
            "--metrics-addr",
            "none",
        ],
        &dir.join("run.log"),
    );
    run.wait_windows(5, Duration::from_secs(60));
    let (status, stop_time, log) = run.stop();
    assert!(status.success(), "exit 0 on SIGTERM ({status}):\n{log}");
    assert!(
        stop_time < Duration::from_secs(8),
        "the stop waited {stop_time:?} on a backend that never answers:\n{log}"
    );
    // tonic reports its own deadline as "Timeout expired"; sonde's outer one as "no answer within".
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("export failed, retrying")
            && (l.contains("Timeout expired") || l.contains("no answer within"))),
        "the hang is reported as a timeout, at WARN:\n{log}"
    );
    let s = exit_summary(&log);
    let produced = field(&s, "windows_produced", &log);
    assert!(produced >= 5, "{produced} windows:\n{log}");
    assert_eq!(field(&s, "windows_delivered", &log), 0, "{log}");
    assert_eq!(field(&s, "windows_lost", &log), 0, "no window lost:\n{log}");
    assert_eq!(field(&s, "windows_spooled", &log), produced, "{log}");
    assert!(
        field(&s, "sonde_export_retries_total", &log) >= 1,
        "timeouts are retried:\n{log}"
    );
    for reason in [
        "queue_full",
        "retries_exhausted",
        "shutdown_timeout",
        "rejected",
    ] {
        let key = format!("sonde_export_dropped_batches_total{{reason=\"{reason}\"}}");
        assert_eq!(field(&s, &key, &log), 0, "{key}:\n{log}");
    }
    assert_eq!(
        spool_files(&data).len() as u64,
        produced,
        "one spool file per window"
    );
}
