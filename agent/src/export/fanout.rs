//! [`FanOut`]: sends each batch to several sinks concurrently (e.g. an OTLP backend and the local directory).

use super::{Batch, ExportError, ExportOutcome, Sink};

/// Exports to every inner sink; succeeds when all do, else reports how many failed (the others still got
/// the batch, so a caller must not retry the whole fan-out).
pub struct FanOut {
    sinks: Vec<Box<dyn Sink>>,
}

impl FanOut {
    /// A fan-out over `sinks`.
    pub fn new(sinks: Vec<Box<dyn Sink>>) -> Self {
        Self { sinks }
    }
}

#[async_trait::async_trait]
impl Sink for FanOut {
    fn name(&self) -> &'static str {
        "fanout"
    }

    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        let results =
            futures_util::future::join_all(self.sinks.iter().map(|s| s.export(batch))).await;
        let total = results.len();
        let mut outcome = ExportOutcome::default();
        let mut errors = Vec::new();
        for (sink, result) in self.sinks.iter().zip(results) {
            match result {
                Ok(o) => outcome.merge(&o),
                Err(err) => {
                    tracing::warn!(sink = sink.name(), error = %crate::metadata::error_chain(&err), "sink failed");
                    errors.push(err);
                }
            }
        }
        match errors.len() {
            0 => Ok(outcome),
            failed => Err(ExportError::FanOut {
                failed,
                total,
                first: Box::new(errors.swap_remove(0)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::null::NullSink;
    use std::sync::Arc;

    struct Shared(Arc<NullSink>);

    #[async_trait::async_trait]
    impl Sink for Shared {
        fn name(&self) -> &'static str {
            "shared"
        }
        async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
            self.0.export(batch).await
        }
    }

    struct Failing;

    #[async_trait::async_trait]
    impl Sink for Failing {
        fn name(&self) -> &'static str {
            "failing"
        }
        async fn export(&self, _: &Batch) -> Result<ExportOutcome, ExportError> {
            Err(ExportError::Header { name: "x".into() })
        }
    }

    #[tokio::test]
    async fn every_sink_gets_the_batch_and_failures_are_reported() {
        let a = Arc::new(NullSink::default());
        let b = Arc::new(NullSink::default());
        let fan = FanOut::new(vec![
            Box::new(Shared(a.clone())),
            Box::new(Failing),
            Box::new(Shared(b.clone())),
        ]);
        let err = fan.export(&Batch::default()).await.unwrap_err();
        assert!(
            matches!(
                err,
                ExportError::FanOut {
                    failed: 1,
                    total: 3,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!((a.batches(), b.batches()), (1, 1));
    }
}
