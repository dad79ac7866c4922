//! The spool's bound, as root with real BPF: with the backend down and a bound of 256 KiB (the test
//! hook `--test-spool-max-kib`; `--spool-max-mib`'s floor of 1 MiB took some 90 windows to fill),
//! windows keep being spooled; once the spool is full the oldest are dropped and counted
//! (`spool_full`), the newest stay, the disk used stays within the bound, and the exit line adds up.

use crate::common as bpf;
use crate::common::daemon;
use crate::common::otlp;

use std::time::{Duration, Instant};

use daemon::{Daemon, exit_summary, field, spool_disk_bytes, spool_files};

/// Distinct workload processes: each is its own resource, so windows are large enough to fill the
/// spool in seconds.
const PROCESSES: usize = 24;
/// The spool's bound, bytes.
const BOUND: u64 = 256 << 10;

#[test]
fn a_full_spool_drops_its_oldest_windows_and_counts_them() {
    bpf::require_root();
    let bin = bpf::build_workload("recursion", "recursion_spool", bpf::FP_FLAGS);
    let dir = bpf::temp_dir("spool_bound");
    let data = dir.join("data");
    let endpoint = format!("http://{}", otlp::free_port());
    let mut run = Daemon::start(
        &[
            "--otlp-endpoint",
            &endpoint,
            "--export-interval",
            "1",
            "--offcpu",
            "--offcpu-budget",
            "0",
            "--test-spool-max-kib",
            &(BOUND >> 10).to_string(),
            "--data-dir",
            data.to_str().unwrap(),
            "--metrics-addr",
            "none",
        ],
        &dir.join("run.log"),
    );
    // The workloads start once sonde makes windows: 24 busy processes on a small machine would
    // otherwise starve the kernel's verification of its programs for tens of seconds.
    run.wait_windows(1, Duration::from_secs(60));
    let _workloads: Vec<bpf::Workload> = (0..PROCESSES)
        .map(|i| bpf::Workload::start(&bin, &["120", &(20 + i * 7).to_string()]))
        .collect();
    // Wait until the first spooled window has been pushed out by newer ones.
    let first = loop {
        if let Some((name, _)) = spool_files(&data).into_iter().next() {
            break name;
        }
        run.wait_windows(run.windows() + 1, Duration::from_secs(30));
    };
    // The spool fills at the pace of the windows' size, which depends on the host's processes: wait
    // for as many windows as the bound takes at the size seen so far, twice over.
    run.wait_windows(run.windows() + 3, Duration::from_secs(30));
    let files = spool_files(&data);
    let mean = files.iter().map(|(_, l)| *l).sum::<u64>() / files.len().max(1) as u64;
    let windows_to_fill = BOUND / mean.max(1) + 1;
    let deadline = Instant::now() + Duration::from_secs((2 * windows_to_fill).clamp(60, 400));
    let mut peak = 0;
    while spool_files(&data).iter().any(|(n, _)| *n == first) {
        peak = peak.max(spool_disk_bytes(&data));
        assert!(
            Instant::now() < deadline,
            "the spool never dropped its oldest window; {} bytes in {} files:\n{}",
            spool_disk_bytes(&data),
            spool_files(&data).len(),
            run.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run.wait_windows(run.windows() + 2, Duration::from_secs(30));
    peak = peak.max(spool_disk_bytes(&data));
    let (status, _, log) = run.stop();
    assert!(status.success(), "exit 0 ({status}):\n{log}");

    let files = spool_files(&data);
    let on_disk = spool_disk_bytes(&data);
    let sizes: Vec<u64> = files.iter().map(|(_, l)| *l).collect();
    eprintln!(
        "spool: {} files, {on_disk} bytes, peak {peak}, sizes {sizes:?}",
        files.len()
    );
    assert!(
        on_disk <= BOUND,
        "{on_disk} bytes on disk for a spool of {BOUND}"
    );
    assert!(peak <= BOUND, "the spool peaked at {peak} bytes");
    let s = exit_summary(&log);
    let produced = field(&s, "windows_produced", &log);
    let lost = field(&s, "windows_lost", &log);
    let full = field(
        &s,
        "sonde_export_dropped_batches_total{reason=\"spool_full\"}",
        &log,
    );
    assert!(full >= 1, "evictions counted:\n{log}");
    assert_eq!(lost, full, "every loss is a spool eviction:\n{log}");
    assert_eq!(
        field(&s, "windows_spooled", &log),
        files.len() as u64,
        "{log}"
    );
    assert_eq!(
        produced,
        field(&s, "windows_delivered", &log) + files.len() as u64 + lost,
        "produced = delivered + spooled + lost:\n{log}"
    );
    assert!(
        log.lines().any(
            |l| l.contains("WARN") && l.contains("reason=\"spool_full\"")
                || l.contains("WARN") && l.contains("reason=spool_full")
        ),
        "each eviction is logged at WARN with its reason:\n{log}"
    );
    // What is left is the newest (window ends are the file names' prefix), except possibly the window
    // that was in flight, being retried, when the stop spooled it.
    let older = files
        .iter()
        .filter(|(n, _)| n.as_str() <= first.as_str())
        .count();
    assert!(
        older <= 1,
        "{older} windows older than a dropped one were kept: {files:?}"
    );
}
