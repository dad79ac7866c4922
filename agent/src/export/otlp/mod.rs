//! [`OtlpSink`]: OTLP profiles over gRPC (`opentelemetry.proto.collector.profiles.v1development.ProfilesService/
//! Export`, proto layout v1.10, the signal is still "development" upstream).
//!
//! One window becomes one request (split to stay under `max_request_bytes`, 4 MiB by default), compressed with
//! gzip (or zstd). Each request is retried per the OTLP spec with [`RetryPolicy`]; INVALID_ARGUMENT and other
//! permanent errors are not retried, nor is a partial success (its rejected count is logged and returned).
//! TLS (rustls, system roots plus an optional CA file, and a client certificate for mutual TLS) is used
//! when the endpoint is `https://` ([`tls`]).

pub mod encode;

use std::sync::Arc;

use tonic::{codec::CompressionEncoding, metadata::MetadataMap, transport::Channel};

use super::{
    Batch, ExportError, ExportMetrics, ExportOutcome, Sink, Spoolable, retry::RetryPolicy,
};
use crate::{
    profile::otlp_proto::collector::{
        ExportProfilesServiceRequest, profiles_service_client::ProfilesServiceClient,
    },
    remote::RemoteConfig,
};

/// Request compression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// gzip (every OTLP receiver supports it).
    #[default]
    Gzip,
    /// zstd (smaller and cheaper; the receiver must support it).
    Zstd,
    /// No compression.
    None,
}

/// Settings of the OTLP sink.
#[derive(Clone, Debug)]
pub struct OtlpConfig {
    /// Endpoint (`http://host:port` or `https://host:port`), headers (`authorization`, a tenant),
    /// deadline of one attempt and TLS.
    pub remote: RemoteConfig,
    /// Request compression.
    pub compression: Compression,
    /// Largest encoded request before it is split.
    pub max_request_bytes: usize,
    /// Backoff of retries.
    pub retry: RetryPolicy,
}

impl OtlpConfig {
    /// Defaults for `endpoint`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            remote: RemoteConfig::new("otlp", endpoint),
            compression: Compression::Gzip,
            max_request_bytes: encode::DEFAULT_MAX_REQUEST_BYTES,
            retry: RetryPolicy::default(),
        }
    }
}

/// Sends batches to an OTLP profiles endpoint.
pub struct OtlpSink {
    client: ProfilesServiceClient<Channel>,
    headers: MetadataMap,
    config: OtlpConfig,
    metrics: Arc<ExportMetrics>,
}

impl OtlpSink {
    /// Builds the sink. Connects lazily (an endpoint that is down now is retried on export); must be called
    /// inside a tokio runtime.
    pub fn new(config: OtlpConfig, metrics: Arc<ExportMetrics>) -> Result<Self, ExportError> {
        let channel = config.remote.grpc_channel()?;
        let mut client = ProfilesServiceClient::new(channel).max_encoding_message_size(usize::MAX);
        client = match config.compression {
            Compression::Gzip => client.send_compressed(CompressionEncoding::Gzip),
            Compression::Zstd => client.send_compressed(CompressionEncoding::Zstd),
            Compression::None => client,
        };
        Ok(Self {
            client,
            headers: config.remote.metadata()?,
            config,
            metrics,
        })
    }

    async fn send_one(&self, request: &ExportProfilesServiceRequest) -> Result<u64, ExportError> {
        let remote = &self.config.remote;
        let req = remote.request(request.clone(), &self.headers);
        let mut client = self.client.clone();
        let answer = remote.within(client.export(req)).await;
        let response = answer.map_err(|s| super::retry::call_error("otlp", remote, &s))?;
        let rejected = match response.into_inner().partial_success {
            Some(p) if p.rejected_profiles > 0 || !p.error_message.is_empty() => {
                tracing::warn!(
                    rejected = p.rejected_profiles,
                    message = %p.error_message,
                    "OTLP endpoint accepted the request partially; the rejected profiles are not retried"
                );
                p.rejected_profiles.max(0) as u64
            }
            _ => 0,
        };
        Ok(rejected)
    }
}

#[async_trait::async_trait]
impl Sink for OtlpSink {
    fn name(&self) -> &'static str {
        "otlp"
    }

    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        let requests = encode::encode_batch(batch, self.config.max_request_bytes);
        self.send_all(&requests).await
    }

    fn spoolable(&self) -> Option<&dyn Spoolable> {
        Some(self)
    }
}

impl OtlpSink {
    /// Sends each request with its deadline and the retry policy; stops at the first failure.
    async fn send_all(
        &self,
        requests: &[ExportProfilesServiceRequest],
    ) -> Result<ExportOutcome, ExportError> {
        let mut outcome = ExportOutcome::default();
        for request in requests {
            let rejected = self
                .config
                .retry
                .run(&self.metrics, || self.send_one(request))
                .await?;
            outcome.requests += 1;
            outcome.bytes += prost::Message::encoded_len(request) as u64;
            outcome.rejected_profiles += rejected;
        }
        Ok(outcome)
    }
}

#[async_trait::async_trait]
impl Spoolable for OtlpSink {
    fn encode(&self, batch: &Batch) -> Vec<Vec<u8>> {
        encode::encode_batch(batch, self.config.max_request_bytes)
            .iter()
            .map(prost::Message::encode_to_vec)
            .collect()
    }

    async fn send_encoded(&self, requests: &[Vec<u8>]) -> Result<ExportOutcome, ExportError> {
        let requests = requests
            .iter()
            .map(|r| <ExportProfilesServiceRequest as prost::Message>::decode(r.as_slice()))
            .collect::<Result<Vec<_>, _>>()?;
        self.send_all(&requests).await
    }
}
