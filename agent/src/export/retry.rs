//! Retry policy of the OTLP exporter: exponential backoff with full jitter, honouring the server's
//! `google.rpc.RetryInfo`, and the OTLP spec's table of retryable gRPC status codes.

use std::time::{Duration, Instant};

use prost::Message as _;

use super::{ExportError, ExportMetrics};

/// Backoff settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Delay ceiling before the first retry.
    pub initial: Duration,
    /// Largest delay ceiling.
    pub max: Duration,
    /// Growth factor of the ceiling per attempt.
    pub multiplier: f64,
    /// Give up when this much time has passed since the first attempt.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            multiplier: 2.0,
            max_elapsed: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (1-based): uniform in [ceiling/2, ceiling] (jitter keeps a fleet
    /// of agents from retrying in lockstep), or the server's delay when it asked for one.
    pub fn delay(&self, attempt: u32, server: Option<Duration>) -> Duration {
        if let Some(d) = server {
            return d.min(self.max_elapsed);
        }
        let ceiling =
            self.initial.as_secs_f64() * self.multiplier.powi(attempt.saturating_sub(1) as i32);
        let ceiling = ceiling.min(self.max.as_secs_f64());
        Duration::from_secs_f64(ceiling * (0.5 + fastrand::f64() * 0.5))
    }

    /// Runs `op` until it succeeds, fails for good, or the budget is spent. Counts retries in `metrics`.
    pub async fn run<T, F, Fut>(&self, metrics: &ExportMetrics, mut op: F) -> Result<T, ExportError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ExportError>>,
    {
        let start = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let err = match op().await {
                Ok(v) => return Ok(v),
                Err(err) if !err.is_retryable() => return Err(err),
                Err(err) => err,
            };
            let delay = self.delay(attempt, err.retry_after());
            if start.elapsed() + delay > self.max_elapsed {
                return Err(ExportError::RetriesExhausted {
                    attempts: attempt,
                    elapsed: start.elapsed(),
                    last: Box::new(err),
                });
            }
            // The first failure says why (a timeout, a refused connection); later ones repeat it.
            if attempt == 1 {
                tracing::warn!(?delay, error = %err, "export failed, retrying");
            } else {
                tracing::debug!(attempt, ?delay, error = %err, "export failed, retrying");
            }
            ExportMetrics::add(&metrics.retries, 1);
            tokio::time::sleep(delay).await;
        }
    }
}

/// Classifies a gRPC status per the OTLP spec: CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
/// UNAVAILABLE and DATA_LOSS are retryable; RESOURCE_EXHAUSTED only when the server sent RetryInfo.
pub fn classify(sink: &'static str, status: &tonic::Status) -> ExportError {
    use tonic::Code;
    let retry_after = retry_info(status.details());
    let retryable = match status.code() {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => true,
        Code::ResourceExhausted => retry_after.is_some(),
        _ => false,
    };
    ExportError::Rpc {
        sink,
        code: status.code(),
        message: status.message().to_owned(),
        retryable,
        retry_after,
    }
}

/// What a failed call of `sink` to `remote` means: a refused TLS handshake in words (not retried), or
/// the status [`classify`]d.
pub(crate) fn call_error(
    sink: &'static str,
    remote: &crate::remote::RemoteConfig,
    status: &tonic::Status,
) -> ExportError {
    match crate::remote::tls::handshake_failure(&remote.endpoint, remote.section, status) {
        Some(tls) => ExportError::Tls(tls),
        None => classify(sink, status),
    }
}

/// `google.rpc.Status` as carried in `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    /// Status code.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// Message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Typed details.
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<RpcAny>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcAny {
    /// Type URL.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// Encoded message.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.RetryInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RetryInfo {
    /// Delay the client should wait.
    #[prost(message, optional, tag = "1")]
    pub retry_delay: Option<RpcDuration>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcDuration {
    /// Seconds.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Nanoseconds.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// Type URL of `google.rpc.RetryInfo`.
pub const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// The RetryInfo delay in encoded status details.
pub fn retry_info(details: &[u8]) -> Option<Duration> {
    let status = RpcStatus::decode(details).ok()?;
    let any = status
        .details
        .iter()
        .find(|a| a.type_url == RETRY_INFO_TYPE)?;
    let delay = RetryInfo::decode(any.value.as_slice()).ok()?.retry_delay?;
    Some(Duration::new(
        delay.seconds.max(0) as u64,
        delay.nanos.max(0) as u32,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_codes_follow_the_spec() {
        assert!(classify("otlp", &tonic::Status::unavailable("down")).is_retryable());
        assert!(classify("otlp", &tonic::Status::deadline_exceeded("slow")).is_retryable());
        assert!(classify("otlp", &tonic::Status::aborted("x")).is_retryable());
        assert!(!classify("otlp", &tonic::Status::invalid_argument("bad")).is_retryable());
        assert!(!classify("otlp", &tonic::Status::unauthenticated("who")).is_retryable());
        assert!(!classify("otlp", &tonic::Status::resource_exhausted("no info")).is_retryable());
    }

    #[test]
    fn resource_exhausted_with_retry_info_is_retried_after_the_given_delay() {
        let info = RetryInfo {
            retry_delay: Some(RpcDuration {
                seconds: 2,
                nanos: 500_000_000,
            }),
        };
        let status = RpcStatus {
            code: tonic::Code::ResourceExhausted as i32,
            message: "slow down".into(),
            details: vec![RpcAny {
                type_url: RETRY_INFO_TYPE.into(),
                value: info.encode_to_vec(),
            }],
        };
        let s = tonic::Status::with_details(
            tonic::Code::ResourceExhausted,
            "slow down",
            status.encode_to_vec().into(),
        );
        let err = classify("otlp", &s);
        assert!(err.is_retryable());
        assert_eq!(err.retry_after(), Some(Duration::from_millis(2500)));
        assert_eq!(
            RetryPolicy::default().delay(1, err.retry_after()),
            Duration::from_millis(2500)
        );
    }

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let p = RetryPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(400),
            ..Default::default()
        };
        for _ in 0..50 {
            let d1 = p.delay(1, None);
            assert!(
                d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100),
                "{d1:?}"
            );
            let d3 = p.delay(3, None);
            assert!(
                d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400),
                "{d3:?}"
            );
            let d9 = p.delay(9, None);
            assert!(d9 <= Duration::from_millis(400), "{d9:?}");
        }
    }
}
