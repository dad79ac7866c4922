//! [`ParcaSink`]: Parca's profile store (`parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw`)
//! over gRPC (h2c for `http://`, TLS for `https://`; Polar Signals Cloud takes a bearer token).
//!
//! One window becomes one `WriteRawRequest` (split under 4 MiB) with one series per workload and
//! profile type, labelled as for Pyroscope ([`crate::remote::labels`]), one gzip pprof each. The pprof
//! is already symbolized, with runtime addresses inside their mappings (`normalized = false`: Parca
//! relates them to its files through the mappings' start and offset). No `executable_info` is sent:
//! it serves Parca's own symbolization of unsymbolized frames, which sonde's profiles do not ask for.

use std::sync::Arc;

use prost::Message;
use tonic::{metadata::MetadataMap, transport::Channel};

use super::{
    Batch, ExportError, ExportMetrics,
    pprof_series::{self, Push, PushSink, Series},
    retry::{self, RetryPolicy},
};
use crate::remote::{
    RemoteConfig,
    proto::parca::profilestore::v1alpha1::{
        Label, LabelSet, RawProfileSeries, RawSample, WriteRawRequest,
        profile_store_service_client::ProfileStoreServiceClient,
    },
};

/// Settings of the Parca sink.
#[derive(Clone, Debug)]
pub struct ParcaConfig {
    /// Endpoint (`http://parca:7070`), headers (`authorization`), deadline, TLS.
    pub remote: RemoteConfig,
    /// Backoff of retries.
    pub retry: RetryPolicy,
}

impl ParcaConfig {
    /// Defaults for `endpoint`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            remote: RemoteConfig::new("parca", endpoint),
            retry: RetryPolicy::default(),
        }
    }
}

/// Parca's profile store behind [`PushSink`].
pub struct Parca {
    client: ProfileStoreServiceClient<Channel>,
    metadata: MetadataMap,
    remote: RemoteConfig,
}

/// Writes windows into Parca.
pub type ParcaSink = PushSink<Parca>;

impl PushSink<Parca> {
    /// Builds the sink; connects on first use (inside a tokio runtime).
    pub fn new(config: ParcaConfig, metrics: Arc<ExportMetrics>) -> Result<Self, ExportError> {
        Ok(Self {
            push: Parca {
                client: ProfileStoreServiceClient::new(config.remote.grpc_channel()?)
                    .max_encoding_message_size(usize::MAX),
                metadata: config.remote.metadata()?,
                remote: config.remote,
            },
            retry: config.retry,
            metrics,
        })
    }
}

#[async_trait::async_trait]
impl Push for Parca {
    const NAME: &'static str = "parca";

    fn encode(batch: &Batch) -> Vec<Vec<u8>> {
        encode_batch(batch)
    }

    async fn send(&self, request: &[u8]) -> Result<(), ExportError> {
        let remote = &self.remote;
        let message = WriteRawRequest::decode(request)?;
        let mut client = self.client.clone();
        remote
            .within(client.write_raw(remote.request(message, &self.metadata)))
            .await
            .map(drop)
            .map_err(|s| retry::call_error(Self::NAME, remote, &s))
    }
}

/// `batch` as encoded `WriteRawRequest`s.
pub fn encode_batch(batch: &Batch) -> Vec<Vec<u8>> {
    let series: Vec<RawProfileSeries> = pprof_series::series(batch)
        .into_iter()
        .map(
            |Series {
                 labels,
                 raw_profile,
             }| RawProfileSeries {
                labels: Some(LabelSet {
                    labels: labels
                        .into_iter()
                        .map(|(name, value)| Label { name, value })
                        .collect(),
                }),
                samples: vec![RawSample {
                    raw_profile,
                    executable_info: Vec::new(),
                }],
            },
        )
        .collect();
    pprof_series::pack(series, pprof_series::MAX_REQUEST_BYTES, |s| s.encoded_len())
        .into_iter()
        .map(|series| {
            #[allow(deprecated)] // `tenant`: Parca takes the tenant from the connection now.
            WriteRawRequest {
                tenant: String::new(),
                series,
                normalized: false,
            }
            .encode_to_vec()
        })
        .collect()
}
