//! The agent's one metrics registry (prometheus-client), its HTTP endpoints and its health.
//!
//! Components keep their own cheap counters (atomics on the export path, plain counters on the sampler
//! thread, handed over inside each window); this module folds them into [`state::State`] once per window
//! and publishes everything, with stable names, help and units, through one registry. Per-window
//! coverage is read from the batch as it leaves ([`coverage`]), so it is what the backend receives.

mod collector;
pub mod coverage;
mod export_series;
mod health;
pub mod http;
mod state;
pub mod text;
mod usage;

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use prometheus_client::registry::Registry;

pub use health::{Health, Watch};
pub use state::LastWindow;

use crate::{export::Batch, export::Destinations, sampler::Window};

/// The registry and what it reads.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    state: Arc<Mutex<state::State>>,
    destinations: Destinations,
    /// Liveness and readiness.
    pub health: Arc<Health>,
    cpus: usize,
}

impl Metrics {
    /// One registry for the daemon whose sinks are `destinations` and whose windows last `interval`;
    /// `local_dir` is the data directory when profiles are kept locally.
    pub fn new(
        destinations: Destinations,
        interval: Duration,
        local_dir: Option<PathBuf>,
    ) -> Arc<Self> {
        let state = Arc::new(Mutex::new(state::State::default()));
        let health = Arc::new(Health::new(interval));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector::AgentCollector {
            state: state.clone(),
            destinations: destinations.clone(),
            health: health.clone(),
            local_dir,
        }));
        Arc::new(Self {
            registry,
            state,
            destinations,
            health,
            cpus: usage::online_cpus(),
        })
    }

    /// Folds in one window and the batch made of it; returns the window's figures.
    pub fn record_window(&self, window: &Window, batch: &Batch) -> LastWindow {
        let (agent_cpu, rss) = usage::agent_usage();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.record(window, batch, agent_cpu, self.cpus);
        state.last.rss_bytes = rss;
        state.last.clone()
    }

    /// Whether the programs are attached and a first window was delivered.
    pub fn ready(&self) -> bool {
        self.health.ready(self.destinations.delivered())
    }

    /// Everything, as OpenMetrics text.
    pub fn openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail, and every collector writes whole lines.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
