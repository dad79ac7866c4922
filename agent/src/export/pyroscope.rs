//! [`PyroscopeSink`]: Grafana Pyroscope's push API (`push.v1.PusherService/Push`), which Grafana Cloud
//! Profiles and Alloy's `pyroscope.receive_http` serve too.
//!
//! One window becomes one `PushRequest` (split under 4 MiB): one `RawProfileSeries` per workload and
//! profile type, labelled by [`crate::remote::labels`], holding one gzip pprof whose `ID` is derived from
//! the window's batch id, so a replayed window carries the ids it had. Sent over the Connect protocol
//! (unary HTTP/1.1, `application/proto`, the default: what Pyroscope's own clients speak) or gRPC
//! (HTTP/2), with the same retries, spool and accounting as OTLP.

use std::{
    hash::{Hash, Hasher},
    sync::Arc,
};

use prost::Message;
use tonic::{metadata::MetadataMap, transport::Channel};

use super::{
    BATCH_ID_KEY, Batch, ExportError, ExportMetrics,
    pprof_series::{self, Push, PushSink, Series},
    retry::{self, RetryPolicy},
};
use crate::remote::{
    RemoteConfig,
    connect::ConnectClient,
    proto::{
        push::v1::{
            PushRequest, RawProfileSeries, RawSample, pusher_service_client::PusherServiceClient,
        },
        types::v1::LabelPair,
    },
};

/// The push method's path, for Connect.
const PUSH_PATH: &str = "/push.v1.PusherService/Push";

/// How requests reach Pyroscope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PushProtocol {
    /// Connect unary calls over HTTP/1.1 (Pyroscope's default; passes HTTP/1.1 proxies).
    #[default]
    Connect,
    /// gRPC over HTTP/2 (h2c for http://).
    Grpc,
}

/// Settings of the Pyroscope sink.
#[derive(Clone, Debug)]
pub struct PyroscopeConfig {
    /// Endpoint (`http://pyroscope:4040`), headers (`X-Scope-OrgID`, `authorization`), deadline, TLS.
    pub remote: RemoteConfig,
    /// Connect or gRPC.
    pub protocol: PushProtocol,
    /// Backoff of retries.
    pub retry: RetryPolicy,
}

impl PyroscopeConfig {
    /// Defaults for `endpoint`: Connect, no headers, 10 s.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            remote: RemoteConfig::new("pyroscope", endpoint),
            protocol: PushProtocol::Connect,
            retry: RetryPolicy::default(),
        }
    }
}

enum Transport {
    // Boxed: the hyper client is several times the size of a tonic client.
    Connect(Box<ConnectClient>),
    Grpc(PusherServiceClient<Channel>),
}

/// Pyroscope's push protocol behind [`PushSink`].
pub struct Pyroscope {
    transport: Transport,
    metadata: MetadataMap,
    remote: RemoteConfig,
}

/// Pushes windows to Pyroscope.
pub type PyroscopeSink = PushSink<Pyroscope>;

impl PushSink<Pyroscope> {
    /// Builds the sink; connects on first use (inside a tokio runtime).
    pub fn new(config: PyroscopeConfig, metrics: Arc<ExportMetrics>) -> Result<Self, ExportError> {
        let transport = match config.protocol {
            PushProtocol::Connect => {
                Transport::Connect(Box::new(ConnectClient::new(&config.remote)?))
            }
            PushProtocol::Grpc => Transport::Grpc(
                PusherServiceClient::new(config.remote.grpc_channel()?)
                    .max_encoding_message_size(usize::MAX),
            ),
        };
        Ok(Self {
            push: Pyroscope {
                transport,
                metadata: config.remote.metadata()?,
                remote: config.remote,
            },
            retry: config.retry,
            metrics,
        })
    }
}

#[async_trait::async_trait]
impl Push for Pyroscope {
    const NAME: &'static str = "pyroscope";

    fn encode(batch: &Batch) -> Vec<Vec<u8>> {
        encode_batch(batch)
    }

    async fn send(&self, request: &[u8]) -> Result<(), ExportError> {
        let remote = &self.remote;
        let answer = match &self.transport {
            Transport::Connect(client) => client.unary(PUSH_PATH, request.to_vec()).await.map(drop),
            Transport::Grpc(client) => {
                let message = PushRequest::decode(request)?;
                let mut client = client.clone();
                remote
                    .within(client.push(remote.request(message, &self.metadata)))
                    .await
                    .map(drop)
            }
        };
        answer.map_err(|s| retry::call_error(Self::NAME, remote, &s))
    }
}

/// `batch` as encoded `PushRequest`s.
pub fn encode_batch(batch: &Batch) -> Vec<Vec<u8>> {
    let batch_id = batch.heartbeat.get(BATCH_ID_KEY).unwrap_or_default();
    let series: Vec<RawProfileSeries> = pprof_series::series(batch)
        .into_iter()
        .enumerate()
        .map(
            |(
                i,
                Series {
                    labels,
                    raw_profile,
                },
            )| RawProfileSeries {
                labels: labels
                    .into_iter()
                    .map(|(name, value)| LabelPair { name, value })
                    .collect(),
                samples: vec![RawSample {
                    raw_profile,
                    id: profile_id(batch_id, i),
                }],
                annotations: Vec::new(),
            },
        )
        .collect();
    pprof_series::pack(series, pprof_series::MAX_REQUEST_BYTES, |s| s.encoded_len())
        .into_iter()
        .map(|series| PushRequest { series }.encode_to_vec())
        .collect()
}

/// A UUID-shaped id of the `index`th profile of the batch `batch_id`: the same on a replay, different
/// for every profile of every window.
fn profile_id(batch_id: &str, index: usize) -> String {
    let half = |salt: u8| {
        // DefaultHasher::new() has fixed keys: the same input hashes the same in every run.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (salt, batch_id, index).hash(&mut h);
        h.finish()
    };
    let (a, b) = (half(0), half(1));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        // Version 8 (custom) and the RFC 4122 variant bits.
        0x8000 | (a & 0x0fff),
        0x8000 | (b >> 48 & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_ids_are_stable_and_distinct() {
        let a = profile_id("00ff-1", 0);
        assert_eq!(a, profile_id("00ff-1", 0));
        assert_ne!(a, profile_id("00ff-1", 1));
        assert_ne!(a, profile_id("00ff-2", 0));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8");
    }
}
