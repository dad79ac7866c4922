//! [`Destinations`]: every sink of the daemon at once. Each configured backend (OTLP, Pyroscope, Parca;
//! the local data directory when there is none) gets its own [`Exporter`]: its own queue, retries,
//! disk spool (`<data-dir>/spool` for OTLP, `<data-dir>/spool-<sink>` for the others), tally and
//! counters (labelled `sink` in `/metrics`). A window is submitted to each, so one backend that is
//! down neither holds back nor loses the windows of another, and each accounts for every window
//! itself (produced = delivered + spooled + lost, per sink).

use std::{sync::Arc, time::Duration};

use super::{
    ExportError, ExportMetrics, ExportSummary, Exporter, Sink,
    local::LocalDirSink,
    otlp::{OtlpConfig, OtlpSink},
    parca::{ParcaConfig, ParcaSink},
    pyroscope::{PyroscopeConfig, PyroscopeSink},
    spool::{Spool, SpoolLimits},
};
use crate::{export::Batch, retention::Policy, storage::SafeDir};

/// The remote backends configured; none means the local data directory.
#[derive(Clone, Debug, Default)]
pub struct Backends {
    /// OTLP profiles over gRPC.
    pub otlp: Option<OtlpConfig>,
    /// Pyroscope's push API.
    pub pyroscope: Option<PyroscopeConfig>,
    /// Parca's profile store.
    pub parca: Option<ParcaConfig>,
}

impl Backends {
    /// Whether no remote backend is configured (windows go to the local data directory).
    pub fn is_empty(&self) -> bool {
        self.otlp.is_none() && self.pyroscope.is_none() && self.parca.is_none()
    }

    /// `name=endpoint` of each backend, for the start line.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.otlp {
            out.push(format!("otlp={}", c.remote.endpoint));
        }
        if let Some(c) = &self.pyroscope {
            out.push(format!("pyroscope={}", c.remote.endpoint));
        }
        if let Some(c) = &self.parca {
            out.push(format!("parca={}", c.remote.endpoint));
        }
        out
    }
}

/// How the exporters are bounded.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Windows kept in memory per sink.
    pub queue_capacity: usize,
    /// Bounds of each remote sink's spool.
    pub spool: SpoolLimits,
}

/// One sink's exporter.
#[derive(Clone, Debug)]
pub struct Destination {
    /// The sink's name (`otlp`, `pyroscope`, `parca`, `local`): the `sink` label.
    pub name: &'static str,
    /// Its queue, spool and counters.
    pub exporter: Exporter,
}

/// Every sink's exporter. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Destinations(Arc<Vec<Destination>>);

/// Why the destinations could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    /// A sink could not be built from its settings.
    #[error("cannot use the {sink} sink: {source}")]
    Sink {
        /// The sink.
        sink: &'static str,
        /// What was wrong.
        #[source]
        source: ExportError,
    },
    /// A sink's spool directory could not be used.
    #[error("cannot use the {sink} sink's spool directory in the data directory: {source}")]
    Spool {
        /// The sink.
        sink: &'static str,
        /// What was wrong.
        #[source]
        source: super::spool::SpoolError,
    },
}

impl Destinations {
    /// Builds every configured sink with its exporter, inside a tokio runtime. Spools are opened (and
    /// checked) here, before anything is loaded.
    pub(crate) fn open(
        backends: &Backends,
        data: &SafeDir,
        retention: &Policy,
        limits: Limits,
    ) -> Result<Self, OpenError> {
        let mut list = Vec::new();
        if backends.is_empty() {
            let metrics = Arc::new(ExportMetrics::default());
            let sink = LocalDirSink::in_dir(data.clone())
                .map_err(|e| OpenError::Sink {
                    sink: "local",
                    source: e.into(),
                })?
                .with_retention(retention.clone())
                .with_metrics(metrics.clone());
            list.push(Destination {
                name: "local",
                exporter: Exporter::spawn(Arc::new(sink), limits.queue_capacity, metrics),
            });
        }
        type Build<'a> =
            Box<dyn FnOnce(Arc<ExportMetrics>) -> Result<Arc<dyn Sink>, ExportError> + 'a>;
        let mut remote: Vec<(&'static str, &'static str, Build)> = Vec::new();
        if let Some(c) = &backends.otlp {
            remote.push((
                "otlp",
                "spool",
                Box::new(|m| Ok(Arc::new(OtlpSink::new(c.clone(), m)?))),
            ));
        }
        if let Some(c) = &backends.pyroscope {
            remote.push((
                "pyroscope",
                "spool-pyroscope",
                Box::new(|m| Ok(Arc::new(PyroscopeSink::new(c.clone(), m)?))),
            ));
        }
        if let Some(c) = &backends.parca {
            remote.push((
                "parca",
                "spool-parca",
                Box::new(|m| Ok(Arc::new(ParcaSink::new(c.clone(), m)?))),
            ));
        }
        for (name, dir, build) in remote {
            let metrics = Arc::new(ExportMetrics::default());
            let sink =
                build(metrics.clone()).map_err(|source| OpenError::Sink { sink: name, source })?;
            let (spool, evicted) = Spool::open(data, dir, limits.spool, metrics.clone())
                .map_err(|source| OpenError::Spool { sink: name, source })?;
            list.push(Destination {
                name,
                exporter: Exporter::spawn_spooled(
                    sink,
                    limits.queue_capacity,
                    metrics,
                    Arc::new(spool),
                    evicted,
                ),
            });
        }
        Ok(Self(Arc::new(list)))
    }

    /// Destinations made of existing exporters (tests, benches).
    pub fn of(list: Vec<Destination>) -> Self {
        Self(Arc::new(list))
    }

    /// Each sink's exporter.
    pub fn iter(&self) -> impl Iterator<Item = &Destination> {
        self.0.iter()
    }

    /// Queues `batch` on every sink; false when one of them lost a window to make room.
    pub fn submit(&self, batch: Batch) -> bool {
        let mut kept = true;
        for d in self.0.iter() {
            kept &= d.exporter.submit(batch.clone());
        }
        kept
    }

    /// Windows waiting in memory, over every sink.
    pub fn queued(&self) -> usize {
        self.0.iter().map(|d| d.exporter.queued()).sum()
    }

    /// Windows delivered by any sink (readiness: a first window has left).
    pub fn delivered(&self) -> u64 {
        self.0
            .iter()
            .map(|d| ExportMetrics::get(&d.exporter.metrics().batches_sent))
            .max()
            .unwrap_or(0)
    }

    /// Resolves when a task of any exporter has died, with which and what happened.
    pub async fn failed(&self) -> String {
        let waits = self.0.iter().map(|d| {
            Box::pin(async move { format!("{} sink: {}", d.name, d.exporter.failed().await) })
        });
        futures_util::future::select_all(waits).await.0
    }

    /// What killed a task of an exporter, if one died.
    pub fn fatal(&self) -> Option<String> {
        self.0
            .iter()
            .find_map(|d| d.exporter.fatal().map(|f| format!("{} sink: {f}", d.name)))
    }

    /// Stops every exporter at once (each flushes within `timeout`): where each sink's windows ended.
    pub async fn shutdown(&self, timeout: Duration) -> Vec<(&'static str, ExportSummary)> {
        let stops = self
            .0
            .iter()
            .map(|d| async move { (d.name, d.exporter.shutdown(timeout).await) });
        futures_util::future::join_all(stops).await
    }
}
