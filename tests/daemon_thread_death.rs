//! A panic in the sampling thread (a hidden test hook) ends `sonde run` with a non-zero status and an
//! ERROR line naming it, so systemd's `Restart=on-failure` or Kubernetes restarts the agent; the
//! windows made before it are still accounted for at exit.

#[path = "common/mod.rs"]
mod bpf;
#[path = "common/daemon.rs"]
mod daemon;

use std::time::Duration;

use daemon::{Daemon, exit_summary, field};

#[test]
fn a_sampler_panic_exits_non_zero() {
    bpf::require_root();
    let bin = bpf::build_workload("cpu_split", "cpu_split_death", bpf::FP_FLAGS);
    let _workload = bpf::Workload::start(&bin, &["60"]);
    let dir = bpf::temp_dir("thread_death");
    let data = dir.join("data");
    let run = Daemon::start(
        &[
            "--export-interval",
            "1",
            "--data-dir",
            data.to_str().unwrap(),
            "--metrics-addr",
            "none",
            "--test-panic-after-windows",
            "2",
        ],
        &dir.join("run.log"),
    );
    let (status, log) = run.wait_exit(Duration::from_secs(60));
    assert!(
        !status.success(),
        "a dead sampling thread must fail the process, got {status}:\n{log}"
    );
    assert_eq!(status.code(), Some(1), "{log}");
    let error = log
        .lines()
        .find(|l| l.contains("ERROR") && l.contains("the sampling thread panicked"))
        .unwrap_or_else(|| panic!("no ERROR line naming the panic:\n{log}"));
    assert!(error.contains("test hook"), "{error}");
    // The two windows made before the panic reached the data directory.
    let s = exit_summary(&log);
    assert_eq!(field(&s, "windows_produced", &log), 2, "{log}");
    assert_eq!(field(&s, "windows_delivered", &log), 2, "{log}");
    let index = std::fs::read_to_string(data.join("index.jsonl")).unwrap_or_default();
    assert!(
        !index.is_empty(),
        "the windows before the panic were written:\n{log}"
    );
}
