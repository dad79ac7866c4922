//! [`Exporter`]: a bounded queue between the window loop and a [`Sink`], drained by one delivery task.
//!
//! The producer never blocks: [`Exporter::submit`] pushes and, when the queue is full, drops the oldest batch
//! (counted as `dropped_batches_total{reason="queue_full"}`). The task exports one batch at a time; retries
//! happen inside the sink, so a backend outage longer than `capacity` windows costs the oldest windows.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::Notify;

use super::{Batch, ExportError, ExportMetrics, Sink};

struct Shared {
    queue: Mutex<VecDeque<Arc<Batch>>>,
    capacity: usize,
    wake: Notify,
    idle: Notify,
    busy: Mutex<bool>,
    closed: std::sync::atomic::AtomicBool,
    metrics: Arc<ExportMetrics>,
    /// End of the window being delivered, ns since the epoch (0: none).
    in_flight_end: std::sync::atomic::AtomicI64,
}

/// Handle to the delivery task. Cheap to clone.
#[derive(Clone)]
pub struct Exporter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("queued", &self.queued())
            .field("capacity", &self.shared.capacity)
            .finish()
    }
}

impl Exporter {
    /// Spawns the delivery task on the current tokio runtime. `capacity` is the number of windows kept while
    /// the backend is slow or down (at least 1).
    pub fn spawn(sink: Arc<dyn Sink>, capacity: usize, metrics: Arc<ExportMetrics>) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            wake: Notify::new(),
            idle: Notify::new(),
            busy: Mutex::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
            metrics,
            in_flight_end: std::sync::atomic::AtomicI64::new(0),
        });
        tokio::spawn(deliver(shared.clone(), sink));
        Self { shared }
    }

    /// Queues `batch` without waiting. Returns false when an older batch had to be dropped to make room.
    pub fn submit(&self, batch: Batch) -> bool {
        let mut dropped = false;
        {
            let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            while queue.len() >= self.shared.capacity {
                queue.pop_front();
                ExportMetrics::add(&self.shared.metrics.dropped_queue_full, 1);
                dropped = true;
            }
            queue.push_back(Arc::new(batch));
        }
        if dropped {
            tracing::warn!(
                capacity = self.shared.capacity,
                "export queue full: dropped the oldest window"
            );
        }
        self.shared.wake.notify_one();
        !dropped
    }

    /// Batches waiting (not counting the one being delivered).
    pub fn queued(&self) -> usize {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// End of the oldest window produced but not yet delivered (queued or in flight), ns since the
    /// epoch.
    pub fn oldest_undelivered_end(&self) -> Option<i64> {
        let queued = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .front()
            .map(|b| b.end_unix_nanos);
        let in_flight = self
            .shared
            .in_flight_end
            .load(std::sync::atomic::Ordering::Relaxed);
        let in_flight = (in_flight != 0).then_some(in_flight);
        in_flight.into_iter().chain(queued).min()
    }

    /// The counters this exporter updates.
    pub fn metrics(&self) -> &Arc<ExportMetrics> {
        &self.shared.metrics
    }

    /// Waits until the queue is empty and nothing is in flight, or `timeout` passes. Returns true when drained.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let drained = async {
            loop {
                let idle = self.shared.idle.notified();
                if self.queued() == 0
                    && !*self.shared.busy.lock().unwrap_or_else(|e| e.into_inner())
                {
                    return;
                }
                idle.await;
            }
        };
        tokio::time::timeout(timeout, drained).await.is_ok()
    }

    /// Stops the delivery task after the batch in flight; queued batches are discarded.
    pub fn close(&self) {
        self.shared
            .closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.shared.wake.notify_one();
    }
}

async fn deliver(shared: Arc<Shared>, sink: Arc<dyn Sink>) {
    loop {
        let wake = shared.wake.notified();
        if shared.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let next = {
            let mut queue = shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            let next = queue.pop_front();
            *shared.busy.lock().unwrap_or_else(|e| e.into_inner()) = next.is_some();
            if let Some(batch) = &next {
                shared
                    .in_flight_end
                    .store(batch.end_unix_nanos, std::sync::atomic::Ordering::Relaxed);
            }
            next
        };
        let Some(batch) = next else {
            shared.idle.notify_waiters();
            wake.await;
            continue;
        };
        let m = &shared.metrics;
        match sink.export(&batch).await {
            Ok(outcome) => {
                ExportMetrics::add(&m.batches_sent, 1);
                let lag = crate::metrics::unix_nanos_now().saturating_sub(batch.end_unix_nanos);
                m.last_ingest_lag_ms.store(
                    u64::try_from(lag / 1_000_000).unwrap_or(0),
                    std::sync::atomic::Ordering::Relaxed,
                );
                ExportMetrics::add(&m.requests_sent, outcome.requests);
                ExportMetrics::add(&m.bytes_sent, outcome.bytes);
                if outcome.rejected_profiles > 0 {
                    ExportMetrics::add(&m.partial_rejected_profiles, outcome.rejected_profiles);
                }
            }
            Err(err) => {
                let counter = match &err {
                    ExportError::RetriesExhausted { .. } => &m.dropped_retries_exhausted,
                    ExportError::Io { .. } => &m.dropped_write_failed,
                    _ => &m.dropped_rejected,
                };
                ExportMetrics::add(counter, 1);
                tracing::warn!(sink = sink.name(), error = %crate::metadata::error_chain(&err), "dropped a window");
            }
        }
        shared
            .in_flight_end
            .store(0, std::sync::atomic::Ordering::Relaxed);
        *shared.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }
}
