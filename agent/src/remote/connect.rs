//! The Connect protocol's unary calls (<https://connectrpc.com/docs/protocol>): one HTTP/1.1 POST of the
//! binary protobuf request to `<endpoint>/<package.Service>/<Method>`, `Content-Type: application/proto`,
//! answered by the binary response with status 200, or an error as JSON `{"code": ..., "message": ...}`.
//! Pyroscope (connect-go) serves it on the same port as gRPC; it passes HTTP/1.1 proxies and load
//! balancers that gRPC cannot.
//!
//! Failures become [`tonic::Status`] with the gRPC code of the Connect code, so the sinks classify and
//! retry them with the same rules as gRPC; a transport failure keeps its source, so a refused TLS
//! handshake is put in words by [`super::tls::handshake_failure`].

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode, body::Bytes, header};
use hyper_util::client::legacy::{Client, connect::HttpConnector};

use super::{RemoteConfig, RemoteError};

/// Largest response read (a merged profile from a querier can be large; beyond this is an error).
const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// A Connect client of one endpoint.
#[derive(Clone)]
pub(crate) struct ConnectClient {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    headers: Vec<(header::HeaderName, header::HeaderValue)>,
    timeout: Duration,
    /// The configuration section messages name.
    section: &'static str,
}

impl std::fmt::Debug for ConnectClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectClient")
            .field("base", &self.base)
            .finish()
    }
}

impl ConnectClient {
    /// A client of `config`'s endpoint; connects on first use.
    pub(crate) fn new(config: &RemoteConfig) -> Result<Self, RemoteError> {
        let tls = super::tls::rustls_config(config)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        let mut headers = Vec::new();
        for (name, value) in &config.headers {
            let bad = || RemoteError::Header {
                section: config.section,
                name: name.clone(),
            };
            headers.push((
                header::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
                    .map_err(|_| bad())?,
                header::HeaderValue::from_str(value).map_err(|_| bad())?,
            ));
        }
        Ok(Self {
            client,
            base: config.endpoint.trim_end_matches('/').to_owned(),
            headers,
            timeout: config.timeout,
            section: config.section,
        })
    }

    /// Calls `method` (`/package.Service/Method`) with the encoded `body`; the encoded response.
    pub(crate) async fn unary(&self, method: &str, body: Vec<u8>) -> Result<Bytes, tonic::Status> {
        let mut req = Request::post(format!("{}{method}", self.base))
            .header(header::CONTENT_TYPE, "application/proto")
            .header("connect-protocol-version", "1")
            .header("connect-timeout-ms", self.timeout.as_millis().to_string());
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        let req = req.body(Full::new(Bytes::from(body))).map_err(|e| {
            tonic::Status::invalid_argument(format!("cannot build the request: {e}"))
        })?;
        let call = async {
            let response = self.client.request(req).await.map_err(|e| {
                // A transport failure is what gRPC calls Unavailable (retried); its source is kept
                // so a refused TLS handshake can be named.
                let mut status = tonic::Status::unavailable(format!("{}{method}: {e}", self.base));
                status.set_source(std::sync::Arc::new(e));
                status
            })?;
            let code = response.status();
            let body = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| tonic::Status::unavailable(format!("reading the answer: {e}")))?
                .to_bytes();
            if code == StatusCode::OK {
                return Ok(body);
            }
            Err(error_status(code, &body))
        };
        super::within(self.section, self.timeout, call).await
    }
}

/// The gRPC status of a Connect error answer: its JSON `code` when there is one, else the HTTP status
/// mapped as the Connect protocol specifies.
fn error_status(http: StatusCode, body: &[u8]) -> tonic::Status {
    #[derive(serde::Deserialize)]
    struct ConnectError {
        code: Option<String>,
        message: Option<String>,
    }
    let parsed: Option<ConnectError> = serde_json::from_slice(body).ok();
    let text = || String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
    let message = parsed
        .as_ref()
        .and_then(|e| e.message.clone())
        .unwrap_or_else(text);
    let code = parsed
        .and_then(|e| e.code)
        .and_then(|c| connect_code(&c))
        .unwrap_or_else(|| http_code(http));
    tonic::Status::new(code, format!("HTTP {}: {message}", http.as_u16()))
}

fn connect_code(name: &str) -> Option<tonic::Code> {
    use tonic::Code as C;
    Some(match name {
        "canceled" => C::Cancelled,
        "unknown" => C::Unknown,
        "invalid_argument" => C::InvalidArgument,
        "deadline_exceeded" => C::DeadlineExceeded,
        "not_found" => C::NotFound,
        "already_exists" => C::AlreadyExists,
        "permission_denied" => C::PermissionDenied,
        "resource_exhausted" => C::ResourceExhausted,
        "failed_precondition" => C::FailedPrecondition,
        "aborted" => C::Aborted,
        "out_of_range" => C::OutOfRange,
        "unimplemented" => C::Unimplemented,
        "internal" => C::Internal,
        "unavailable" => C::Unavailable,
        "data_loss" => C::DataLoss,
        "unauthenticated" => C::Unauthenticated,
        _ => return None,
    })
}

/// The Connect protocol's HTTP-to-code table, for answers without a Connect error body (a proxy's).
fn http_code(http: StatusCode) -> tonic::Code {
    use tonic::Code as C;
    match http.as_u16() {
        400 => C::Internal,
        401 => C::Unauthenticated,
        403 => C::PermissionDenied,
        404 => C::Unimplemented,
        408 => C::DeadlineExceeded,
        409 => C::Aborted,
        412 => C::FailedPrecondition,
        413 => C::ResourceExhausted,
        415 => C::Internal,
        429 | 502..=504 => C::Unavailable,
        _ => C::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_errors_map_to_grpc_codes() {
        let s = error_status(
            StatusCode::SERVICE_UNAVAILABLE,
            br#"{"code":"unavailable","message":"ingester ring not ready"}"#,
        );
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert!(s.message().contains("ingester ring not ready"));
        let s = error_status(
            StatusCode::BAD_REQUEST,
            br#"{"code":"invalid_argument","message":"invalid labels"}"#,
        );
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        // A proxy's HTML page: the HTTP status decides.
        let s = error_status(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert_eq!(s.code(), tonic::Code::Unavailable);
        let s = error_status(StatusCode::UNAUTHORIZED, b"");
        assert_eq!(s.code(), tonic::Code::Unauthenticated);
    }
}
