//! Outage across a restart, as root with real BPF and a real gRPC receiver on loopback:
//! - the backend is down while `sonde run` makes 4 windows of a running workload; SIGTERM; the run
//!   exits 0 and says every window is spooled (none lost), and the spool holds one file per window;
//! - the backend comes up and sonde starts again: every window of the first run arrives (deduplicated by
//!   `sonde.batch.id`), with the workload's samples in it, and the second run's exit line and counters
//!   agree with what arrived;
//! - a damaged spool file planted between the runs is quarantined (`*.corrupt`) and counted, and
//!   does not stop the replay of the others.

use crate::common as bpf;
use crate::common::daemon;
use crate::common::otlp;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use daemon::{Daemon, exit_summary, field, spool_files};
use sonde::profile::otlp_proto::{
    collector::ExportProfilesServiceRequest, common::any_value::Value,
};

/// (batch id, process pids) of every resource of `request`.
fn resources(request: &ExportProfilesServiceRequest) -> Vec<(String, Option<i64>)> {
    request
        .resource_profiles
        .iter()
        .map(|rp| {
            let attrs = &rp.resource.as_ref().unwrap().attributes;
            let get = |k: &str| {
                attrs
                    .iter()
                    .find(|kv| kv.key == k)
                    .and_then(|kv| kv.value.clone())
                    .and_then(|v| v.value)
            };
            let id = match get("sonde.batch.id") {
                Some(Value::StringValue(id)) => id,
                other => panic!("every resource carries sonde.batch.id as a string, got {other:?}"),
            };
            let pid = match get("process.pid") {
                Some(Value::IntValue(pid)) => Some(pid),
                _ => None,
            };
            (id, pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_of_an_outage_arrive_after_a_restart() {
    bpf::require_root();
    let bin = bpf::build_workload("cpu_split", "cpu_split_spool", bpf::FP_FLAGS);
    let workload = bpf::Workload::start(&bin, &["120"]);
    let dir = bpf::temp_dir("spool_restart");
    let data = dir.join("data");
    let addr = otlp::free_port();
    let endpoint = format!("http://{addr}");
    let args = [
        "--otlp-endpoint",
        &endpoint,
        "--export-interval",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
        "--metrics-addr",
        "none",
    ];

    // Run 1: nothing listens on the port.
    let mut first = Daemon::start(&args, &dir.join("run1.log"));
    first.wait_windows(4, Duration::from_secs(60));
    let (status, stop_time, log1) = first.stop();
    assert!(
        status.success(),
        "run 1 exits 0 on SIGTERM ({status}):\n{log1}"
    );
    assert!(
        stop_time < Duration::from_secs(12),
        "a stop with the backend down took {stop_time:?}:\n{log1}"
    );
    let s1 = exit_summary(&log1);
    let produced = field(&s1, "windows_produced", &log1);
    assert!(produced >= 4, "run 1 produced {produced} windows:\n{log1}");
    assert_eq!(field(&s1, "windows_delivered", &log1), 0, "{log1}");
    assert_eq!(
        field(&s1, "windows_lost", &log1),
        0,
        "nothing lost:\n{log1}"
    );
    assert_eq!(
        field(&s1, "windows_spooled", &log1),
        produced,
        "every window spooled:\n{log1}"
    );
    assert_eq!(
        field(&s1, "sonde_export_spooled_batches_total", &log1),
        produced
    );
    let files = spool_files(&data);
    assert_eq!(
        files.len() as u64,
        produced,
        "one spool file per window: {files:?}"
    );
    let spooled: BTreeSet<String> = files
        .iter()
        .map(|(n, _)| daemon::batch_id_of_file(n))
        .collect();
    assert_eq!(spooled.len() as u64, produced, "batch ids are distinct");
    let bytes: u64 = files.iter().map(|(_, len)| len).sum();
    eprintln!(
        "run 1: {produced} windows spooled, {} bytes per window",
        bytes / produced
    );

    // A damaged file, older than every window: replayed first, it must be set aside, not sent.
    let planted = "00000000000000000001-00000000000000ee-0.batch";
    std::fs::write(
        data.join("spool").join(planted),
        b"SONDESPL but torn mid-write",
    )
    .unwrap();

    // Run 2: the backend is up.
    let state = Arc::new(otlp::Received::default());
    otlp::start_receiver(addr, state.clone()).await;
    let mut second = Daemon::start(&args, &dir.join("run2.log"));
    let received = |state: &otlp::Received| -> BTreeMap<String, Vec<Option<i64>>> {
        let mut by_id: BTreeMap<String, Vec<Option<i64>>> = BTreeMap::new();
        for request in state.requests() {
            for (id, pid) in resources(&request) {
                by_id.entry(id).or_default().push(pid);
            }
        }
        by_id
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !spooled.iter().all(|id| received(&state).contains_key(id)) {
        assert!(
            Instant::now() < deadline,
            "run 1's windows did not all arrive; received {:?}:\n{}",
            received(&state).keys().collect::<Vec<_>>(),
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Blocking waits off the receiver's async threads.
    let (status, _, log2) = tokio::task::block_in_place(move || {
        second.wait_windows(2, Duration::from_secs(30));
        second.stop()
    });
    assert!(status.success(), "run 2 exits 0 ({status}):\n{log2}");

    let by_id = received(&state);
    let pid = i64::from(workload.pid());
    for id in &spooled {
        assert!(
            by_id[id].contains(&Some(pid)),
            "run 1's window {id} arrived without the workload (pid {pid}): {:?}",
            by_id[id]
        );
    }
    // Run 1's windows were each spooled once, so after deduplication each is one window; run 2's
    // windows are its own ids.
    let run1_prefix = spooled.iter().next().unwrap().split('-').next().unwrap();
    let run2: BTreeSet<&String> = by_id
        .keys()
        .filter(|id| !id.starts_with(run1_prefix))
        .collect();
    let s2 = exit_summary(&log2);
    assert_eq!(
        field(&s2, "earlier_windows_delivered", &log2),
        produced,
        "run 2 delivered every spooled window of run 1:\n{log2}"
    );
    assert_eq!(
        field(&s2, "earlier_windows_lost", &log2),
        1,
        "the damaged file's window is the one loss:\n{log2}"
    );
    assert_eq!(
        field(&s2, "sonde_export_spool_quarantined_files_total", &log2),
        1,
        "{log2}"
    );
    assert!(
        data.join("spool")
            .join(planted.replace(".batch", ".corrupt"))
            .exists(),
        "the damaged file is kept aside as *.corrupt"
    );
    assert!(!by_id.keys().any(|id| id.starts_with("00000000000000ee")));
    assert_eq!(
        field(&s2, "sonde_export_replayed_batches_total", &log2),
        produced,
        "{log2}"
    );
    let produced2 = field(&s2, "windows_produced", &log2);
    let delivered2 = field(&s2, "windows_delivered", &log2);
    assert_eq!(
        produced2,
        delivered2 + field(&s2, "windows_spooled", &log2) + field(&s2, "windows_lost", &log2),
        "run 2's windows add up:\n{log2}"
    );
    assert_eq!(field(&s2, "windows_lost", &log2), 0, "{log2}");
    assert_eq!(
        run2.len() as u64,
        delivered2,
        "the receiver saw exactly run 2's delivered windows besides run 1's: {run2:?}"
    );
    assert_eq!(
        field(&s2, "sonde_export_batches_sent_total", &log2),
        produced + delivered2,
        "{log2}"
    );
    assert!(
        spool_files(&data).is_empty(),
        "the spool is empty after the replay"
    );
}
