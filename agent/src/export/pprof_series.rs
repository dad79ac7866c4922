//! The seam of the pprof-push backends (Pyroscope, Parca): what they take of a window (one series per
//! workload and profile type, its labels from [`crate::remote::labels`] and one gzip pprof, packed into
//! requests under a size bound), and [`PushSink`], which sends a backend's encoded requests with the
//! retries, spool and counters every remote sink has. A backend only says how to encode a window and
//! how to send one request ([`Push`]).

use std::sync::Arc;

use super::{ExportError, ExportMetrics, ExportOutcome, Sink, Spoolable, retry::RetryPolicy};
use crate::{export::Batch, profile::pprof, remote::labels};

/// One pprof-push backend's protocol.
#[async_trait::async_trait]
pub trait Push: Send + Sync {
    /// The sink's name (`pyroscope`, `parca`).
    const NAME: &'static str;

    /// `batch` as encoded requests (what goes on the wire and into the spool).
    fn encode(batch: &Batch) -> Vec<Vec<u8>>;

    /// Sends one encoded request, once.
    async fn send(&self, request: &[u8]) -> Result<(), ExportError>;
}

/// A sink of the backend `P`: each request sent with the retry policy, counted, spoolable.
pub struct PushSink<P> {
    pub(crate) push: P,
    pub(crate) retry: RetryPolicy,
    pub(crate) metrics: Arc<ExportMetrics>,
}

impl<P: Push> PushSink<P> {
    async fn send_all(&self, requests: &[Vec<u8>]) -> Result<ExportOutcome, ExportError> {
        let mut outcome = ExportOutcome::default();
        for request in requests {
            self.retry
                .run(&self.metrics, || self.push.send(request))
                .await?;
            outcome.requests += 1;
            outcome.bytes += request.len() as u64;
        }
        Ok(outcome)
    }
}

#[async_trait::async_trait]
impl<P: Push> Sink for PushSink<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        self.send_all(&P::encode(batch)).await
    }

    fn spoolable(&self) -> Option<&dyn Spoolable> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl<P: Push> Spoolable for PushSink<P> {
    fn encode(&self, batch: &Batch) -> Vec<Vec<u8>> {
        P::encode(batch)
    }

    async fn send_encoded(&self, requests: &[Vec<u8>]) -> Result<ExportOutcome, ExportError> {
        self.send_all(requests).await
    }
}

/// Largest request before the series are split over several (gRPC servers refuse 4 MiB by default).
pub(crate) const MAX_REQUEST_BYTES: usize = 4 << 20;

/// One workload's profile of one type.
pub(crate) struct Series {
    /// Labels, sorted by name, each once.
    pub(crate) labels: Vec<(String, String)>,
    /// The profile as gzip pprof.
    pub(crate) raw_profile: Vec<u8>,
}

/// The series of `batch`; profiles without samples are left out (a heartbeat-only window has none).
pub(crate) fn series(batch: &Batch) -> Vec<Series> {
    batch
        .profiles
        .iter()
        .filter(|(_, p)| !p.samples.is_empty())
        .map(|(tags, profile)| Series {
            labels: labels::series_labels(profile.kind, tags),
            raw_profile: pprof::encode_gzip(profile),
        })
        .collect()
}

/// `items` in groups whose `size` adds up to at most `max` (an item larger than `max` goes alone).
pub(crate) fn pack<T>(items: Vec<T>, max: usize, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    let mut used = 0;
    for item in items {
        let n = size(&item);
        match out.last_mut() {
            Some(group) if used + n <= max => group.push(item),
            _ => {
                out.push(vec![item]);
                used = 0;
            }
        }
        used += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_under_the_bound() {
        let groups = pack(vec![3, 3, 3, 9, 1], 6, |n| *n);
        assert_eq!(groups, vec![vec![3, 3], vec![3], vec![9], vec![1]]);
        assert!(pack(Vec::<usize>::new(), 6, |n| *n).is_empty());
    }
}
