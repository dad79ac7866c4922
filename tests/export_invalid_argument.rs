//! The receiver answers INVALID_ARGUMENT: the batch is dropped and counted as rejected after exactly one
//! attempt (no retry loop), and the exporter goes on with the next batch.

use crate::common::otlp as common;

use std::{sync::Arc, time::Duration};

use sonde::export::{
    ExportMetrics, Exporter,
    otlp::{OtlpConfig, OtlpSink},
};

#[tokio::test]
async fn invalid_argument_is_dropped_not_retried() {
    let state = Arc::new(common::Received::default());
    *state.always.lock().unwrap() = Some(tonic::Code::InvalidArgument);
    let addr = common::start_receiver("127.0.0.1:0".parse().unwrap(), state.clone()).await;
    let metrics = Arc::new(ExportMetrics::default());
    let mut config = OtlpConfig::new(format!("http://{addr}"));
    config.retry = common::fast_retry();
    let sink = Arc::new(OtlpSink::new(config, metrics.clone()).unwrap());
    let exporter = Exporter::spawn(sink, 4, metrics.clone());

    exporter.submit(common::batch("cart", 0));
    assert!(
        exporter.flush(Duration::from_secs(10)).await,
        "exporter drains"
    );
    // Give a buggy retry loop time to show itself.
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(state.calls(), 1, "exactly one attempt");
    assert_eq!(ExportMetrics::get(&metrics.retries), 0);
    assert_eq!(
        ExportMetrics::get(&metrics.dropped_rejected),
        1,
        "dropped_batches_total{{reason=\"rejected\"}}"
    );
    assert_eq!(ExportMetrics::get(&metrics.batches_sent), 0);

    // The exporter is not stuck: the next batch is attempted too.
    exporter.submit(common::batch("cart", 1));
    assert!(exporter.flush(Duration::from_secs(10)).await);
    assert_eq!(state.calls(), 2);
    assert_eq!(ExportMetrics::get(&metrics.dropped_rejected), 2);
}
