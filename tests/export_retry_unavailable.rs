//! The receiver answers UNAVAILABLE three times, then accepts: the sink retries with growing, jittered
//! delays (at least 50 + 100 + 200 ms with the test policy), the batch arrives once and the retries are counted.

use crate::common::otlp as common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sonde::export::{
    ExportMetrics, Sink as _,
    otlp::{OtlpConfig, OtlpSink},
};

#[tokio::test]
async fn unavailable_is_retried_with_backoff() {
    let state = Arc::new(common::Received::default());
    state
        .script
        .lock()
        .unwrap()
        .extend([common::Answer::Fail(tonic::Code::Unavailable); 3]);
    let addr = common::start_receiver("127.0.0.1:0".parse().unwrap(), state.clone()).await;
    let metrics = Arc::new(ExportMetrics::default());
    let mut config = OtlpConfig::new(format!("http://{addr}"));
    config.retry = common::fast_retry();
    let sink = OtlpSink::new(config, metrics.clone()).unwrap();

    let started = Instant::now();
    sink.export(&common::batch("cart", 0))
        .await
        .expect("delivered after retries");
    let elapsed = started.elapsed();

    assert_eq!(state.calls(), 4, "three failures and one success");
    assert_eq!(state.requests().len(), 1, "the batch arrives once");
    assert_eq!(
        ExportMetrics::get(&metrics.retries),
        3,
        "sonde_export_retries_total counts each retry"
    );
    assert!(
        elapsed >= Duration::from_millis(350),
        "backoff waited between attempts ({elapsed:?})"
    );
}
