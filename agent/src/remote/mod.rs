//! Connections to a profiling backend, shared by every remote sink (OTLP, Pyroscope, Parca) and by
//! `sonde diff`'s queries: one [`RemoteConfig`] (endpoint, headers, deadline, TLS), one way to open a
//! gRPC channel on it ([`RemoteConfig::grpc_channel`]) or a Connect client ([`connect`]), one [`tls`]
//! policy, and the backends' protocols ([`proto`]) with the label rules they share ([`labels`]).

pub(crate) mod connect;
pub mod labels;
pub mod proto;
pub mod tls;

use std::{path::PathBuf, time::Duration};

use tonic::{
    metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap},
    transport::{Channel, Endpoint},
};

/// Added to `timeout` for the whole call, so tonic's own deadline fires first when it can.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);

/// Where a backend is and how to reach it.
#[derive(Clone, Debug)]
pub struct RemoteConfig {
    /// The configuration section these settings come from (`otlp`, `pyroscope`, `parca`): error
    /// messages name its keys.
    pub section: &'static str,
    /// `http://host:port` or `https://host:port` (a path prefix is kept for Connect).
    pub endpoint: String,
    /// Extra headers (gRPC metadata) sent with every request: a tenant, `authorization`.
    pub headers: Vec<(String, String)>,
    /// Deadline of one attempt.
    pub timeout: Duration,
    /// Extra CA certificate (PEM) trusted for https endpoints, besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) presented for mutual TLS; goes with `client_key_file`.
    pub client_cert_file: Option<PathBuf>,
    /// Private key (PEM) of `client_cert_file`.
    pub client_key_file: Option<PathBuf>,
}

impl RemoteConfig {
    /// Defaults for `endpoint` of the section `section`: no headers, 10 s, system roots only.
    pub fn new(section: &'static str, endpoint: impl Into<String>) -> Self {
        Self {
            section,
            endpoint: endpoint.into(),
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
            ca_file: None,
            client_cert_file: None,
            client_key_file: None,
        }
    }

    /// Whether the endpoint is `https://`.
    pub fn is_tls(&self) -> bool {
        self.endpoint.starts_with("https://")
    }

    /// A gRPC channel (HTTP/2; h2c for `http://`) that connects lazily, so a backend down now is retried
    /// on export; must be called inside a tokio runtime.
    pub(crate) fn grpc_channel(&self) -> Result<Channel, RemoteError> {
        let endpoint_err = |source| RemoteError::Endpoint {
            section: self.section,
            endpoint: self.endpoint.clone(),
            source,
        };
        let mut endpoint = Endpoint::from_shared(self.endpoint.clone())
            .map_err(endpoint_err)?
            .timeout(self.timeout)
            .connect_timeout(self.timeout);
        if self.is_tls() {
            endpoint = endpoint
                .tls_config(tls::client_config(self)?)
                .map_err(endpoint_err)?;
        }
        Ok(endpoint.connect_lazy())
    }

    /// The headers as gRPC metadata (names lowercased).
    pub(crate) fn metadata(&self) -> Result<MetadataMap, RemoteError> {
        let mut map = MetadataMap::new();
        for (name, value) in &self.headers {
            let bad = || RemoteError::Header {
                section: self.section,
                name: name.clone(),
            };
            let key: AsciiMetadataKey = name.to_ascii_lowercase().parse().map_err(|_| bad())?;
            let value: AsciiMetadataValue = value.parse().map_err(|_| bad())?;
            map.insert(key, value);
        }
        Ok(map)
    }

    /// `call` bounded by the deadline plus a little: tonic's own timeout covers a call once a connection
    /// is up, this one also a server that accepts the connection and never answers, so a hanging
    /// backend is a (retryable) DEADLINE_EXCEEDED.
    pub(crate) async fn within<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, tonic::Status>>,
    ) -> Result<T, tonic::Status> {
        within(self.section, self.timeout, call).await
    }

    /// A request carrying `message`, the headers and the deadline.
    pub(crate) fn request<T>(&self, message: T, metadata: &MetadataMap) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        for kv in metadata.iter() {
            if let tonic::metadata::KeyAndValueRef::Ascii(k, v) = kv {
                req.metadata_mut().insert(k.clone(), v.clone());
            }
        }
        req.set_timeout(self.timeout);
        req
    }
}

/// [`RemoteConfig::within`] for a client that keeps only the section and the timeout.
pub(crate) async fn within<T>(
    section: &str,
    timeout: Duration,
    call: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<T, tonic::Status> {
    let deadline = timeout + DEADLINE_SLACK;
    tokio::time::timeout(deadline, call)
        .await
        .unwrap_or_else(|_| {
            Err(tonic::Status::deadline_exceeded(format!(
                "no answer within {deadline:?} ({section}.timeout_secs)"
            )))
        })
}

/// Settings of a backend that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The endpoint URL is unusable.
    #[error(
        "cannot use the {section} endpoint {endpoint}: fix `{section}.endpoint` (http:// or https:// URL)"
    )]
    Endpoint {
        /// The configuration section.
        section: &'static str,
        /// The endpoint as configured.
        endpoint: String,
        /// What tonic reported.
        #[source]
        source: tonic::transport::Error,
    },
    /// A header name or value is not valid in gRPC metadata or HTTP.
    #[error("header {name:?} is not a valid header: fix `{section}.headers` or the credentials")]
    Header {
        /// The configuration section.
        section: &'static str,
        /// The header name.
        name: String,
    },
    /// TLS settings unusable, or the TLS handshake refused (not retried).
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}
