//! A panic in the sampling thread (a hidden test hook) ends `sonde run` with a non-zero status and an
//! ERROR line naming it, so systemd's `Restart=on-failure` or Kubernetes restarts the agent; the
//! windows made before it are still accounted for at exit.

use crate::common as bpf;
use crate::common::daemon;

use std::time::Duration;

use daemon::{Daemon, exit_summary, field};

/// `sonde run` with 1 s windows into a fresh data directory (returned), with a sampling-thread test hook.
fn run_with_hook(name: &str, hook: &str, windows: &str) -> (Daemon, std::path::PathBuf) {
    let dir = bpf::temp_dir(name);
    let data = dir.join("data");
    let args = [
        "--export-interval",
        "1",
        "--metrics-addr",
        "none",
        hook,
        windows,
    ];
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--data-dir", data.to_str().unwrap()]);
    (Daemon::start(&all, &dir.join("run.log")), data)
}

#[test]
fn a_sampler_panic_exits_non_zero() {
    bpf::require_root();
    let bin = bpf::build_workload("cpu_split", "cpu_split_death", bpf::FP_FLAGS);
    let _workload = bpf::Workload::start(&bin, &["60"]);
    let (run, data) = run_with_hook("thread_death", "--test-panic-after-windows", "2");
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

/// A sampling thread that stops making windows (a test hook: as if stuck on something a process
/// controls) is a counted stall, then, past the watchdog's limit (6 intervals, at least 30 s), a fatal
/// error: `sonde run` exits 1 by itself so its supervisor restarts it.
#[test]
fn a_stalled_sampler_ends_the_daemon_non_zero() {
    bpf::require_root();
    let (run, _) = run_with_hook("thread_stall", "--test-stall-after-windows", "1");
    let (status, log) = run.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("ERROR") && l.contains("has made no window")),
        "the stall is logged as it begins:\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("ERROR")
            && l.contains("has made no window for")
            && l.contains("stalled")),
        "the fatal stall names itself:\n{log}"
    );
}
