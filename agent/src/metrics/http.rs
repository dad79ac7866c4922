//! `/metrics`, `/healthz` and `/readyz` on `--metrics-addr`, served by axum on the daemon's runtime.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::State,
    http::{HeaderMap, StatusCode, header},
    response::IntoResponse,
    routing::get,
};

use super::{Metrics, text};
use crate::targets::Targets;

/// The endpoint could not be opened.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot listen on {addr} for --metrics-addr: {source}; pick a free address, or `--metrics-addr none`"
)]
pub(crate) struct BindError {
    addr: SocketAddr,
    #[source]
    source: std::io::Error,
}

/// Binds `addr` now (so a taken port fails before anything is loaded) and returns the server to spawn.
pub(crate) async fn bind(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    targets: Arc<Targets>,
) -> Result<impl std::future::Future<Output = ()>, BindError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })?;
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(
            "/targets",
            get(move || {
                let targets = targets.clone();
                async move { targets_json(&targets) }
            }),
        )
        .with_state(metrics);
    Ok(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(%err, "the metrics endpoint stopped");
        }
    })
}

async fn scrape(State(metrics): State<Arc<Metrics>>, headers: HeaderMap) -> impl IntoResponse {
    let wants_openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let body = metrics.openmetrics();
    if wants_openmetrics {
        ([(header::CONTENT_TYPE, text::OPENMETRICS)], body)
    } else {
        (
            [(header::CONTENT_TYPE, text::PROMETHEUS)],
            text::to_prometheus(&body),
        )
    }
}

async fn healthz(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    if metrics.health.live() {
        (StatusCode::OK, "live\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the sampling thread has made no window for more than two intervals\n",
        )
    }
}

async fn readyz(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    if metrics.ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: programs not attached or no window delivered yet\n",
        )
    }
}

/// `/targets`: every target with its discovery labels, final labels, frequency and whether it is
/// kept, as a JSON array by pid (`sonde targets` prints it).
fn targets_json(targets: &Targets) -> impl IntoResponse + use<> {
    let body = serde_json::to_string(&targets.views()).unwrap_or_else(|_| "[]".into());
    ([(header::CONTENT_TYPE, "application/json")], body)
}
