//! Export: one window's profiles ([`Batch`]) leave the agent through a [`Sink`].
//!
//! One file per backend behind the narrow [`Sink`] trait: [`local::LocalDirSink`] (gzip pprof files plus
//! `index.jsonl`, the default without an endpoint), [`otlp::OtlpSink`] (OTLP profiles over gRPC),
//! [`pyroscope::PyroscopeSink`] and [`parca::ParcaSink`] (gzip pprof pushed to those backends).
//! [`Destinations`] runs one exporter per configured sink.
//! [`queue::Exporter`] sits between the window loop and a sink: a bounded queue the producer never
//! blocks on. A remote sink ([`Spoolable`]) gets a disk [`spool`] for what it cannot deliver now; every window that is not delivered is either spooled or
//! counted as lost with its reason. Counters live in [`metrics::ExportMetrics`]; [`size`] measures wire
//! bytes for the benchmarks.

pub mod destinations;
pub mod local;
pub mod metrics;
pub mod otlp;
pub mod parca;
pub mod pprof_series;
pub mod pyroscope;
pub mod queue;
pub mod retry;
pub mod size;
pub mod spool;
mod tally;

use std::{path::PathBuf, time::Duration};

use crate::{metadata::Tags, profile::Profile};

pub use destinations::{Backends, Destination, Destinations};
pub use metrics::ExportMetrics;
pub use queue::{ExportSummary, Exporter};

/// Resource attribute carrying a batch's stable id (`<run id, 16 hex digits>-<sequence>`) on every
/// resource of every request, replays included: a backend or a test deduplicates on it.
pub const BATCH_ID_KEY: &str = "sonde.batch.id";

/// One export window: every workload's profiles of that window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Window start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: i64,
    /// Window end, nanoseconds since the Unix epoch.
    pub end_unix_nanos: i64,
    /// One profile per workload identity per kind, with that workload's tags.
    pub profiles: Vec<(std::sync::Arc<Tags>, Profile)>,
    /// The agent's identity and coverage (`host.name`, `sonde.*`), added to every OTLP resource; a batch
    /// without profiles still carries them (a heartbeat). Empty: none.
    pub heartbeat: Tags,
}

impl Batch {
    /// Total samples over all profiles.
    pub fn sample_count(&self) -> usize {
        self.profiles.iter().map(|(_, p)| p.samples.len()).sum()
    }
}

/// What a successful export did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportOutcome {
    /// Requests sent or files written.
    pub requests: u64,
    /// Bytes on the wire (compressed) or on disk.
    pub bytes: u64,
    /// Profiles the backend reported as rejected in a partial success (not retried).
    pub rejected_profiles: u64,
}

impl ExportOutcome {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &ExportOutcome) {
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.rejected_profiles += other.rejected_profiles;
    }
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The backend answered with an error status.
    #[error("the {sink} endpoint answered {code:?}: {message}{}", if *retryable { " (will retry)" } else { " (not retryable: check the endpoint, headers and payload)" })]
    Rpc {
        /// The sink (`otlp`, `pyroscope`, `parca`).
        sink: &'static str,
        /// gRPC status code.
        code: tonic::Code,
        /// Status message.
        message: String,
        /// Whether the OTLP spec allows a retry of this status.
        retryable: bool,
        /// Server-requested delay (google.rpc.RetryInfo), when given.
        retry_after: Option<Duration>,
    },
    /// Retries went on for longer than the retry budget.
    #[error("gave up after {attempts} attempts over {elapsed:?}; the backend stayed unavailable")]
    RetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last failure.
        #[source]
        last: Box<ExportError>,
    },
    /// The endpoint or its headers are unusable.
    #[error(transparent)]
    Remote(crate::remote::RemoteError),
    /// TLS settings unusable, or the TLS handshake refused (not retried).
    #[error(transparent)]
    Tls(#[from] crate::remote::tls::TlsError),
    /// Writing a local file failed.
    #[error("writing {path} failed: check that the data directory exists and is writable")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory of sonde's own could not be used (disk full, a planted link, a foreign owner).
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// A spooled request does not decode (written by another version?); it is not retried.
    #[error("a spooled request does not decode as a request of its sink: {0}")]
    Decode(#[from] prost::DecodeError),
}

impl From<crate::remote::RemoteError> for ExportError {
    fn from(err: crate::remote::RemoteError) -> Self {
        match err {
            crate::remote::RemoteError::Tls(tls) => ExportError::Tls(tls),
            other => ExportError::Remote(other),
        }
    }
}

impl ExportError {
    /// Whether a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ExportError::Rpc {
                retryable: true,
                ..
            }
        )
    }

    /// Server-requested delay before the next attempt.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ExportError::Rpc { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// A destination for batches. Implementations deliver one batch completely (retrying inside when the backend
/// allows) or fail; they never hold on to the batch.
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Short name for logs (`otlp`, `local`, ...).
    fn name(&self) -> &'static str;

    /// Delivers `batch`.
    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError>;

    /// A remote sink whose batches can wait in the disk spool; `None` (the default) for sinks that are
    /// storage themselves (the local directory) or test doubles.
    fn spoolable(&self) -> Option<&dyn Spoolable> {
        None
    }
}

/// A remote sink's batches as bytes: what the spool keeps, and how to send it later.
#[async_trait::async_trait]
pub trait Spoolable: Send + Sync {
    /// `batch` as the encoded requests [`Spoolable::send_encoded`] sends (what goes on the wire).
    fn encode(&self, batch: &Batch) -> Vec<Vec<u8>>;

    /// Sends requests made by [`Spoolable::encode`], with the sink's deadline and retries.
    async fn send_encoded(&self, requests: &[Vec<u8>]) -> Result<ExportOutcome, ExportError>;
}
