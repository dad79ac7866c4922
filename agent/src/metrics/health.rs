//! Liveness and readiness of the daemon, for `/healthz` and `/readyz`.
//!
//! Live: the sampling thread finished a window within the last two intervals (plus a second of grace
//! for a slow symbolization). Ready: the programs are attached, a first window has been delivered, and
//! the sampling thread is live.
//!
//! The watchdog ([`Health::watch`], called by the daemon every interval) turns a stall into a counted
//! episode and, when it lasts [`STALL_LIMIT_INTERVALS`] intervals (at least [`STALL_LIMIT_MIN`]), into a
//! fatal error: a sampling thread stuck on something a process controls (a file on a FUSE mount it
//! serves, say) must not leave the host unprofiled behind a live-looking agent.

use std::{
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::{Duration, Instant},
};

/// Intervals without a window after which a stall is fatal.
pub(super) const STALL_LIMIT_INTERVALS: u32 = 6;
/// Shortest stall that is fatal, whatever the interval.
pub(super) const STALL_LIMIT_MIN: Duration = Duration::from_secs(30);

/// What the watchdog found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Windows are coming.
    Live,
    /// A stall began now (counted once per episode).
    StallBegan(Duration),
    /// Still stalled, under the limit.
    Stalled,
    /// Stalled past the limit: the daemon should exit non-zero.
    Fatal(Duration),
}
/// Beats and milestones, written by the sampler thread and the export task.
#[derive(Debug)]
pub(crate) struct Health {
    start: Instant,
    interval: Duration,
    /// Milliseconds since `start` of the last beat.
    last_beat_ms: AtomicU64,
    attached: AtomicBool,
    /// Stall episodes so far.
    stalls: AtomicU64,
    /// Whether a stall episode is under way.
    stalled: AtomicBool,
}

impl Health {
    /// Health of a daemon making one window per `interval`, alive as of now.
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            start: Instant::now(),
            interval,
            last_beat_ms: AtomicU64::new(0),
            attached: AtomicBool::new(false),
            stalls: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        }
    }

    /// The sampling thread is alive (called once per window).
    pub(crate) fn beat(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_beat_ms.store(ms, Ordering::Relaxed);
    }

    /// The kernel programs are loaded and attached.
    pub(crate) fn set_attached(&self) {
        self.attached.store(true, Ordering::Relaxed);
        self.beat();
    }

    /// Time since the last beat.
    fn since_beat(&self) -> Duration {
        self.start.elapsed().saturating_sub(Duration::from_millis(
            self.last_beat_ms.load(Ordering::Relaxed),
        ))
    }

    /// Whether the sampling thread beat within the last two windows.
    pub(crate) fn live(&self) -> bool {
        self.since_beat() <= 2 * self.interval + Duration::from_secs(1)
    }

    /// Whether the programs are attached, `delivered` windows include a first one, and windows are
    /// still being made.
    pub(crate) fn ready(&self, delivered: u64) -> bool {
        self.attached.load(Ordering::Relaxed) && delivered > 0 && self.live()
    }

    /// Stall episodes so far.
    pub(crate) fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// How long a stall may last before it is fatal.
    pub(crate) fn stall_limit(&self) -> Duration {
        (self.interval * STALL_LIMIT_INTERVALS).max(STALL_LIMIT_MIN)
    }

    /// The watchdog's look: counts a stall when one begins, and says when it has lasted too long.
    pub(crate) fn watch(&self) -> Watch {
        let since = self.since_beat();
        if self.live() {
            self.stalled.store(false, Ordering::Relaxed);
            return Watch::Live;
        }
        if since > self.stall_limit() {
            return Watch::Fatal(since);
        }
        if self.stalled.swap(true, Ordering::Relaxed) {
            Watch::Stalled
        } else {
            self.stalls.fetch_add(1, Ordering::Relaxed);
            Watch::StallBegan(since)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_counted_once_per_episode_and_fails_readiness() {
        let health = Health::new(Duration::from_millis(5));
        health.set_attached();
        assert_eq!(health.watch(), Watch::Live);
        assert!(health.ready(1));
        // Two intervals and the second of grace pass without a beat.
        std::thread::sleep(Duration::from_millis(1100));
        assert!(matches!(health.watch(), Watch::StallBegan(_)));
        assert_eq!(health.watch(), Watch::Stalled);
        assert!(!health.ready(1), "a stalled agent is not ready");
        assert_eq!(health.stalls(), 1);
        health.beat();
        assert_eq!(health.watch(), Watch::Live);
        assert_eq!(health.stalls(), 1);
    }

    #[test]
    fn the_stall_limit_is_intervals_but_never_under_the_minimum() {
        assert_eq!(
            Health::new(Duration::from_secs(1)).stall_limit(),
            STALL_LIMIT_MIN
        );
        assert_eq!(
            Health::new(Duration::from_secs(60)).stall_limit(),
            Duration::from_secs(360)
        );
    }
}
