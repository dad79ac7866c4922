//! The agent's one metrics registry (prometheus-client), its HTTP endpoints and its health.
//!
//! Components keep their own cheap counters (atomics on the export path, plain counters on the sampler
//! thread, handed over inside each window); each window's figures are computed once from them by the
//! catalogue (`crate::figures`), and this module publishes them, with the export path's atomics read
//! at scrape time, through one registry. Coverage is read from the batch as it leaves, so it is what
//! the backend receives.

mod collector;
mod health;
pub(crate) mod http;
pub(crate) mod text;

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use prometheus_client::registry::Registry;

pub(crate) use health::{Health, Watch};

use crate::{
    export::{Batch, Destinations},
    figures::{self, Figures, Input, Running, Usage},
    sampler::Window,
};

/// The registry and what it reads.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    running: Mutex<Running>,
    /// The last window's figures, read at scrape time.
    figures: Arc<Mutex<Figures>>,
    destinations: Destinations,
    /// Liveness and readiness.
    pub health: Arc<Health>,
    cpus: usize,
}

impl Metrics {
    /// One registry for the daemon whose sinks are `destinations` and whose windows last `interval`;
    /// `local_dir` is the data directory when profiles are kept locally.
    pub(crate) fn new(
        destinations: Destinations,
        interval: Duration,
        local_dir: Option<PathBuf>,
    ) -> Arc<Self> {
        let figures = Arc::new(Mutex::new(Figures::default()));
        let health = Arc::new(Health::new(interval));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector::AgentCollector {
            figures: figures.clone(),
            destinations: destinations.clone(),
            health: health.clone(),
            local_dir,
        }));
        Arc::new(Self {
            registry,
            running: Mutex::new(Running::default()),
            figures,
            destinations,
            health,
            cpus: figures::online_cpus(),
        })
    }

    /// Computes the figures of one window and the batch made of it (what leaves is what counts),
    /// publishes them, and returns them for the other reports.
    pub(crate) fn record_window(&self, window: &Window, batch: &Batch) -> Figures {
        let profiles: Vec<(&str, &crate::profile::Profile)> = batch
            .profiles
            .iter()
            .map(|(tags, p)| {
                let service = tags.get(crate::metadata::keys::SERVICE_NAME);
                (service.unwrap_or(figures::coverage::UNKNOWN), p)
            })
            .collect();
        let input = Input::new(window, &profiles, Usage::now(), self.cpus);
        let figures = self
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .window(&input);
        *self.figures.lock().unwrap_or_else(|e| e.into_inner()) = figures.clone();
        figures
    }

    /// Whether the programs are attached and a first window was delivered.
    pub(crate) fn ready(&self) -> bool {
        self.health.ready(self.destinations.delivered())
    }

    /// Everything, as OpenMetrics text.
    pub(crate) fn openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail, and every collector writes whole lines.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
