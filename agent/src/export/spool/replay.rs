//! Replay: the oldest spooled batch is read, checked and sent with the sink's retries; its file is
//! removed once delivered (or rejected for good) and kept when the backend is still failing.

use std::sync::Arc;

use super::{Spool, SpoolError};
use crate::export::{ExportError, ExportOutcome, Spoolable};

/// What one replay step did.
#[derive(Debug)]
pub(crate) enum Replayed {
    /// The spool is empty.
    Empty,
    /// Delivered; the file is gone.
    Delivered {
        /// The batch id.
        id: String,
        /// What the sink reported.
        outcome: ExportOutcome,
    },
    /// The backend still fails; the file stays for a later attempt.
    Failed(ExportError),
    /// The backend refused the batch for good; the file is gone.
    Rejected {
        /// The batch id.
        id: String,
        /// The refusal.
        error: ExportError,
    },
    /// The file was damaged and has been quarantined (counted as quarantined; its window is lost).
    Quarantined {
        /// The batch id its name carries.
        id: String,
        /// What was wrong.
        error: SpoolError,
    },
}

/// Sends the oldest spooled batch through `sink`.
pub(crate) async fn replay_oldest(spool: &Arc<Spool>, sink: &dyn Spoolable) -> Replayed {
    let Some(name) = spool.oldest() else {
        return Replayed::Empty;
    };
    let loaded = {
        let (spool, name) = (spool.clone(), name.clone());
        tokio::task::spawn_blocking(move || spool.load(&name)).await
    };
    let batch = match loaded {
        Ok(Ok(batch)) => batch,
        Ok(Err(error)) => {
            return Replayed::Quarantined {
                id: super::batch_id(&name).to_owned(),
                error,
            };
        }
        Err(join) => {
            return Replayed::Quarantined {
                id: super::batch_id(&name).to_owned(),
                error: SpoolError::Corrupt {
                    name,
                    reason: format!("reading it failed: {join}"),
                },
            };
        }
    };
    match sink.send_encoded(&batch.requests).await {
        Ok(outcome) => {
            spool.remove(&name);
            Replayed::Delivered {
                id: batch.batch_id,
                outcome,
            }
        }
        Err(error) if is_transient(&error) => Replayed::Failed(error),
        Err(error) => {
            spool.remove(&name);
            Replayed::Rejected {
                id: batch.batch_id,
                error,
            }
        }
    }
}

/// Whether a failed export may succeed later: the backend was unreachable or slow, not refusing.
pub(crate) fn is_transient(error: &ExportError) -> bool {
    matches!(error, ExportError::RetriesExhausted { .. }) || error.is_retryable()
}
