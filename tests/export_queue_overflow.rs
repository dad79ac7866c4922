//! A backend that stays stuck longer than the queue holds: the producer never blocks, the oldest windows are
//! dropped and counted, and the newest ones are delivered once the backend recovers.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use sonde::export::{Batch, ExportError, ExportMetrics, ExportOutcome, Exporter, Sink};

/// A sink that blocks until the gate opens and records the window start of each batch.
struct Gated {
    gate: tokio::sync::Semaphore,
    seen: Mutex<Vec<i64>>,
}

#[async_trait::async_trait]
impl Sink for Gated {
    fn name(&self) -> &'static str {
        "gated"
    }
    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        self.gate.acquire().await.expect("gate open").forget();
        self.seen.lock().unwrap().push(batch.start_unix_nanos);
        Ok(ExportOutcome {
            requests: 1,
            bytes: 10,
            rejected_profiles: 0,
        })
    }
}

fn window(i: i64) -> Batch {
    Batch {
        start_unix_nanos: i,
        end_unix_nanos: i + 1,
        profiles: Vec::new(),
        ..Default::default()
    }
}

#[tokio::test]
async fn oldest_batches_are_dropped_and_counted() {
    let sink = Arc::new(Gated {
        gate: tokio::sync::Semaphore::new(0),
        seen: Mutex::new(Vec::new()),
    });
    let metrics = Arc::new(ExportMetrics::default());
    let exporter = Exporter::spawn(sink.clone(), 2, metrics.clone());

    exporter.submit(window(0));
    // Let the delivery task take window 0 in flight.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let kept: Vec<bool> = (1..=5).map(|i| exporter.submit(window(i))).collect();
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "submit never blocks"
    );
    assert_eq!(
        kept,
        [true, true, false, false, false],
        "submits 3..5 each pushed out the oldest"
    );
    assert_eq!(exporter.queued(), 2);

    sink.gate.add_permits(100);
    assert!(exporter.flush(Duration::from_secs(5)).await);
    assert_eq!(
        *sink.seen.lock().unwrap(),
        [0, 4, 5],
        "in-flight window plus the two newest"
    );
    assert_eq!(ExportMetrics::get(&metrics.dropped_queue_full), 3);
    assert_eq!(ExportMetrics::get(&metrics.batches_sent), 3);
    let summary = metrics.to_string();
    assert!(
        summary.contains("sonde_export_dropped_batches_total{reason=\"queue_full\"} 3"),
        "{summary}"
    );
}
