//! Liveness and readiness of the daemon, for `/healthz` and `/readyz`.
//!
//! Live: the sampling thread finished a window within the last two intervals (plus a second of grace
//! for a slow symbolization). Ready: the programs are attached and a first window has been delivered.

use std::{
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::{Duration, Instant},
};

/// Beats and milestones, written by the sampler thread and the export task.
#[derive(Debug)]
pub struct Health {
    start: Instant,
    interval: Duration,
    /// Milliseconds since `start` of the last beat.
    last_beat_ms: AtomicU64,
    attached: AtomicBool,
}

impl Health {
    /// Health of a daemon making one window per `interval`, alive as of now.
    pub fn new(interval: Duration) -> Self {
        Self {
            start: Instant::now(),
            interval,
            last_beat_ms: AtomicU64::new(0),
            attached: AtomicBool::new(false),
        }
    }

    /// The sampling thread is alive (called once per window).
    pub fn beat(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_beat_ms.store(ms, Ordering::Relaxed);
    }

    /// The kernel programs are loaded and attached.
    pub fn set_attached(&self) {
        self.attached.store(true, Ordering::Relaxed);
        self.beat();
    }

    /// Whether the sampling thread beat within the last two windows.
    pub fn live(&self) -> bool {
        let since = self.start.elapsed().saturating_sub(Duration::from_millis(
            self.last_beat_ms.load(Ordering::Relaxed),
        ));
        since <= 2 * self.interval + Duration::from_secs(1)
    }

    /// Whether the programs are attached and `delivered` windows include a first one.
    pub fn ready(&self, delivered: u64) -> bool {
        self.attached.load(Ordering::Relaxed) && delivered > 0
    }
}
