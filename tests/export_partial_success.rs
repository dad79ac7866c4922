//! The receiver accepts a request partially (rejected_profiles = 1): sonde does not retry, the window counts
//! as sent and the rejected profiles are counted in `sonde_export_partial_success_rejected_profiles_total`.

use crate::common::otlp as common;

use std::{sync::Arc, time::Duration};

use sonde::export::{
    ExportMetrics, Exporter,
    otlp::{OtlpConfig, OtlpSink},
};

#[tokio::test]
async fn partial_success_is_counted_not_retried() {
    let state = Arc::new(common::Received::default());
    state
        .script
        .lock()
        .unwrap()
        .push_back(common::Answer::Partial(1));
    let addr = common::start_receiver("127.0.0.1:0".parse().unwrap(), state.clone()).await;
    let metrics = Arc::new(ExportMetrics::default());
    let mut config = OtlpConfig::new(format!("http://{addr}"));
    config.retry = common::fast_retry();
    let exporter = Exporter::spawn(
        Arc::new(OtlpSink::new(config, metrics.clone()).unwrap()),
        4,
        metrics.clone(),
    );

    exporter.submit(common::batch("cart", 0));
    assert!(exporter.flush(Duration::from_secs(10)).await);
    tokio::time::sleep(Duration::from_millis(300)).await;

    assert_eq!(state.calls(), 1, "no retry after a partial success");
    assert_eq!(ExportMetrics::get(&metrics.retries), 0);
    assert_eq!(ExportMetrics::get(&metrics.batches_sent), 1);
    assert_eq!(ExportMetrics::get(&metrics.partial_rejected_profiles), 1);
    assert!(
        ExportMetrics::get(&metrics.bytes_sent) > 0,
        "bytes_sent counts the request"
    );
}
