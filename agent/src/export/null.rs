//! [`NullSink`]: accepts and counts batches, keeps nothing. For tests and dry runs.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Batch, ExportError, ExportOutcome, Sink};

/// A sink that discards batches and counts them.
#[derive(Debug, Default)]
pub struct NullSink {
    batches: AtomicU64,
    profiles: AtomicU64,
}

impl NullSink {
    /// Batches received so far.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Profiles received so far.
    pub fn profiles(&self) -> u64 {
        self.profiles.load(Ordering::Relaxed)
    }
}

#[async_trait::async_trait]
impl Sink for NullSink {
    fn name(&self) -> &'static str {
        "null"
    }

    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.profiles
            .fetch_add(batch.profiles.len() as u64, Ordering::Relaxed);
        Ok(ExportOutcome::default())
    }
}
