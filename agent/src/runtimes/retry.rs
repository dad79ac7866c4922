//! Looking again at a process whose runtime was not set up yet when it was captured: a JVM usually
//! first sampled while it starts has no code heaps for a few tens of milliseconds, a tracer's thread
//! context is resolved by the dynamic linker only after its library is mapped. Such a process is
//! kept in a bounded list and looked at again with a growing delay ([`RETRY_FIRST`] doubling up to
//! [`RETRY_MAX`], at most [`MAX_ATTEMPTS`] times, [`MAX_RETRIES_PER_CALL`] processes per call). The
//! one retry of process capture, shared by the runtimes that need it.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use super::ProcessCounts;

/// First delay before a starting process is looked at again.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// Longest delay between two looks.
const RETRY_MAX: Duration = Duration::from_secs(5);
/// Looks at one starting process (its capture included) before giving up (about two minutes with the
/// delays above).
const MAX_ATTEMPTS: u32 = 30;
/// Starting processes waited for at once; more are not retried (counted as abandoned).
const MAX_PENDING: usize = 1024;
/// Processes looked at again per call, so one call stays short while the table is locked.
const MAX_RETRIES_PER_CALL: usize = 8;

/// A process waiting for its runtime.
struct Pending {
    /// Looks that found it not ready.
    looks: u32,
    /// When to look again.
    next: Instant,
}

/// The processes one runtime waits for, by pid.
#[derive(Default)]
pub(crate) struct Retries {
    pending: HashMap<u32, Pending>,
}

impl Retries {
    /// `pid` was found not ready: schedules (or reschedules) a look at it, or gives up on it
    /// (counted in `counts`). `what` says what it waits for, in the debug message.
    pub(crate) fn not_ready(&mut self, pid: u32, counts: &mut ProcessCounts, what: &str) {
        let now = Instant::now();
        if let Some(p) = self.pending.get_mut(&pid) {
            p.looks += 1;
            if p.looks >= MAX_ATTEMPTS {
                self.pending.remove(&pid);
                counts.abandoned += 1;
                tracing::debug!(pid, "process {pid}: {what} not ready in time; given up");
                return;
            }
            p.next = now + delay(p.looks - 1);
            return;
        }
        counts.not_ready += 1;
        if self.pending.len() >= MAX_PENDING {
            counts.abandoned += 1;
            return;
        }
        self.pending.insert(
            pid,
            Pending {
                looks: 1,
                next: now + RETRY_FIRST,
            },
        );
    }

    /// `pid` is not waited for any more (found, refused, exited or forgotten).
    pub(crate) fn done(&mut self, pid: u32) {
        self.pending.remove(&pid);
    }

    /// The processes due for another look at `now` (at most [`MAX_RETRIES_PER_CALL`]).
    pub(crate) fn due(&self, now: Instant) -> Vec<u32> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        self.pending
            .iter()
            .filter(|(_, p)| p.next <= now)
            .map(|(pid, _)| *pid)
            .take(MAX_RETRIES_PER_CALL)
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

/// The delay after the `retry`-th look again (from 1) found nothing.
fn delay(retry: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1 << retry.min(16))
        .min(RETRY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_processes_are_looked_at_again_with_growing_delays_then_given_up() {
        assert_eq!(delay(1), Duration::from_millis(100));
        assert_eq!(delay(3), Duration::from_millis(400));
        assert_eq!(delay(20), RETRY_MAX);
        let total: Duration = (1..MAX_ATTEMPTS).map(delay).sum();
        assert!(
            (Duration::from_secs(60)..Duration::from_secs(180)).contains(&total),
            "{total:?}"
        );
        let mut retries = Retries::default();
        let mut counts = ProcessCounts::default();
        retries.not_ready(7, &mut counts, "test");
        assert_eq!(counts.not_ready, 1);
        assert!(retries.due(Instant::now()).is_empty(), "not yet");
        assert_eq!(retries.due(Instant::now() + RETRY_FIRST), [7]);
        for _ in 1..MAX_ATTEMPTS {
            retries.not_ready(7, &mut counts, "test");
        }
        assert_eq!((counts.not_ready, counts.abandoned), (1, 1));
        assert_eq!(retries.len(), 0);
        // Bounded: beyond MAX_PENDING processes, the rest are abandoned at once.
        for pid in 0..MAX_PENDING as u32 + 3 {
            retries.not_ready(100 + pid, &mut counts, "test");
        }
        assert_eq!(retries.len(), MAX_PENDING);
        assert_eq!(counts.abandoned, 4);
        let far = Instant::now() + Duration::from_secs(1);
        assert_eq!(retries.due(far).len(), MAX_RETRIES_PER_CALL);
        retries.done(100);
        assert_eq!(retries.len(), MAX_PENDING - 1);
    }
}
