//! The receiver is down when the exporter starts and comes up 800 ms later: the windows queued meanwhile
//! all arrive, each exactly once, in order, and the retries are counted.

use crate::common::otlp as common;

use std::{sync::Arc, time::Duration};

use sonde::{
    export::{
        ExportMetrics, Exporter,
        otlp::{OtlpConfig, OtlpSink},
    },
    profile::otlp_proto::common::any_value::Value,
};

#[tokio::test]
async fn queued_batches_arrive_once_when_the_receiver_comes_up() {
    let addr = common::free_port();
    let metrics = Arc::new(ExportMetrics::default());
    let mut config = OtlpConfig::new(format!("http://{addr}"));
    config.retry = common::fast_retry();
    config.remote.timeout = Duration::from_secs(2);
    let sink = Arc::new(OtlpSink::new(config, metrics.clone()).unwrap());
    let exporter = Exporter::spawn(sink, 8, metrics.clone());
    for window in 0..3 {
        exporter.submit(common::batch(&format!("svc-{window}"), window));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        ExportMetrics::get(&metrics.batches_sent),
        0,
        "nothing delivered while the receiver is down"
    );

    let state = Arc::new(common::Received::default());
    common::start_receiver(addr, state.clone()).await;
    assert!(
        exporter.flush(Duration::from_secs(20)).await,
        "queue drains once the receiver is up"
    );

    let services: Vec<String> = state
        .requests()
        .iter()
        .map(|r| {
            let attrs = &r.resource_profiles[0].resource.as_ref().unwrap().attributes;
            match attrs
                .iter()
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.clone()?.value)
            {
                Some(Value::StringValue(s)) => s,
                other => panic!("service.name missing: {other:?}"),
            }
        })
        .collect();
    assert_eq!(
        services,
        ["svc-0", "svc-1", "svc-2"],
        "each window once, oldest first"
    );
    assert!(
        ExportMetrics::get(&metrics.retries) >= 1,
        "the first window was retried"
    );
    assert_eq!(ExportMetrics::get(&metrics.batches_sent), 3);
    assert_eq!(ExportMetrics::get(&metrics.dropped_queue_full), 0);
}
