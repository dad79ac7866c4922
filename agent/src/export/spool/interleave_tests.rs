//! The export queue with a spool, against an in-memory sink that records what it is sent: replay goes
//! in window order and alternates with live windows, and the exit summary keeps this run's windows
//! apart from earlier runs'.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{Spool, SpoolLimits, SpooledBatch};
use crate::{
    export::{
        BATCH_ID_KEY, Batch, ExportError, ExportMetrics, ExportOutcome, Exporter, Sink, Spoolable,
    },
    storage::{DataMode, SafeDir},
};

/// Records ("live" | "replay", window end) in the order batches arrive.
#[derive(Default)]
struct Recorder(Mutex<Vec<(&'static str, i64)>>);

#[async_trait::async_trait]
impl Sink for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        assert!(
            batch.heartbeat.get(BATCH_ID_KEY).is_some(),
            "ids are given at submit"
        );
        self.0.lock().unwrap().push(("live", batch.end_unix_nanos));
        Ok(ExportOutcome::default())
    }
    fn spoolable(&self) -> Option<&dyn Spoolable> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl Spoolable for Recorder {
    fn encode(&self, batch: &Batch) -> Vec<Vec<u8>> {
        vec![batch.end_unix_nanos.to_le_bytes().to_vec()]
    }
    async fn send_encoded(&self, requests: &[Vec<u8>]) -> Result<ExportOutcome, ExportError> {
        let end = i64::from_le_bytes(requests[0].as_slice().try_into().unwrap());
        self.0.lock().unwrap().push(("replay", end));
        Ok(ExportOutcome::default())
    }
}

#[tokio::test]
async fn replay_alternates_with_live_windows_in_window_order() {
    let path = std::env::temp_dir().join(format!("sonde-interleave-{}", fastrand::u64(..)));
    let root = SafeDir::open_root(&path, DataMode::default()).unwrap();
    let metrics = Arc::new(ExportMetrics::default());
    let limits = SpoolLimits {
        max_bytes: 1 << 20,
        max_age: None,
    };
    let (spool, evicted) = Spool::open(&root, "spool", limits, metrics.clone()).unwrap();
    assert!(evicted.is_empty());
    // An earlier run's windows, stored out of order.
    for end in [13, 11, 15, 12, 14, 16] {
        spool
            .store(&SpooledBatch {
                batch_id: format!("00000000000000ee-{end}"),
                start_unix_nanos: end - 1,
                end_unix_nanos: end,
                requests: vec![i64::to_le_bytes(end).to_vec()],
            })
            .unwrap();
    }
    let spool = Arc::new(spool);
    let sink = Arc::new(Recorder::default());
    let exporter =
        Exporter::spawn_spooled(sink.clone(), 8, metrics.clone(), spool.clone(), Vec::new());
    // Three live windows queued before the delivery task first runs (single-threaded runtime).
    for end in [101, 102, 103] {
        exporter.submit(Batch {
            start_unix_nanos: end - 1,
            end_unix_nanos: end,
            ..Default::default()
        });
    }
    for _ in 0..200 {
        if sink.0.lock().unwrap().len() == 9 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = sink.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            ("live", 101),
            ("replay", 11),
            ("live", 102),
            ("replay", 12),
            ("live", 103),
            ("replay", 13),
            ("replay", 14),
            ("replay", 15),
            ("replay", 16),
        ]
    );
    assert_eq!(spool.oldest(), None, "delivered files are removed");
    let summary = exporter.shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        (
            summary.produced,
            summary.delivered,
            summary.spooled,
            summary.lost
        ),
        (3, 3, 0, 0)
    );
    assert_eq!((summary.earlier_delivered, summary.earlier_lost), (6, 0));
    assert!(summary.adds_up());
    assert_eq!(ExportMetrics::get(&metrics.replayed), 6);
    assert_eq!(ExportMetrics::get(&metrics.batches_sent), 9);
    let _ = std::fs::remove_dir_all(&path);
}
