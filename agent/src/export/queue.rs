//! [`Exporter`]: a bounded queue between the window loop and a [`Sink`], drained by one delivery task,
//! with the disk spool of remote sinks beside it.
//!
//! The producer never blocks: [`Exporter::submit`] gives each batch its id (`sonde.batch.id`) and pushes
//! it. Every window then ends in exactly one of: delivered, spooled (still on disk at exit), or lost and
//! counted under `dropped_batches_total{reason}` with a WARN line.
//! - Without a spool (the local directory): a full queue drops the oldest (`queue_full`); a failed
//!   write is `write_failed`, a refusal `rejected`, a retry budget spent `retries_exhausted`, and what
//!   the stop's flush time does not deliver `shutdown_timeout`.
//! - With a spool (OTLP): a full queue, a retry budget spent, a backend already failing when a window
//!   arrives, and a stop with windows queued or in flight all send the batch to the spool instead
//!   ([`write_spool`], one writer task, so writes never block the producer). The spool's own bounds
//!   drop the oldest (`spool_full`, `spool_expired`).
//!
//! The delivery task alternates one live window with one spooled window when both wait, so replay
//! after an outage neither starves live windows nor is starved by them.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::{Notify, mpsc, watch};

use super::{
    BATCH_ID_KEY, Batch, ExportError, ExportMetrics, ExportOutcome, Sink,
    spool::{self, Evicted, Spool, SpoolError, SpooledBatch, replay::Replayed},
};

pub use super::tally::ExportSummary;
use super::tally::Tally;

/// Pause after a replay that failed, so a backend failing fast is not asked in a tight loop (the
/// sink's own backoff covers the rest).
const REPLAY_PAUSE: Duration = Duration::from_secs(1);

struct Shared {
    queue: Mutex<VecDeque<Arc<Batch>>>,
    capacity: usize,
    wake: Notify,
    metrics: Arc<ExportMetrics>,
    /// The live batch being delivered (handed to the spool when the stop cancels it).
    in_flight: Mutex<Option<Arc<Batch>>>,
    /// End of the window being delivered, ns since the epoch (0: none).
    in_flight_end: AtomicI64,
    /// A delivery attempt (live or replay) is under way, and the retry count when it began.
    attempting: AtomicBool,
    retries_at_start: AtomicU64,
    /// The last attempt failed for good (retries spent); cleared by a success.
    failing: AtomicBool,
    /// An outage was reported (once per outage, not per window).
    outage_logged: AtomicBool,
    spool: Option<Arc<Spool>>,
    /// Batches on their way to the spool writer; `None` once the writer is closed.
    to_spool: Mutex<Option<mpsc::UnboundedSender<Arc<Batch>>>>,
    stop: watch::Sender<bool>,
    /// Set when a task of the exporter died (a panic): the daemon exits non-zero on it.
    fatal: watch::Sender<Option<String>>,
    delivery: Mutex<Option<tokio::task::JoinHandle<()>>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// This run's id (16 hex digits) and the next batch's sequence number.
    run: String,
    seq: AtomicU64,
    tally: Tally,
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
            .field("spool", &self.shared.spool.as_ref().map(|s| s.path()))
            .finish()
    }
}

impl Exporter {
    /// Spawns the delivery task on the current tokio runtime, without a spool. `capacity` is the
    /// number of windows kept while the backend is slow or down (at least 1).
    pub fn spawn(sink: Arc<dyn Sink>, capacity: usize, metrics: Arc<ExportMetrics>) -> Self {
        Self::start(sink, capacity, metrics, None)
    }

    /// Like [`Exporter::spawn`], with `spool` keeping what the sink cannot deliver now (the sink must
    /// be [`super::Spoolable`]). `evicted` are the batches the spool dropped when opened.
    pub(crate) fn spawn_spooled(
        sink: Arc<dyn Sink>,
        capacity: usize,
        metrics: Arc<ExportMetrics>,
        spool: Arc<Spool>,
        evicted: Vec<(String, Evicted)>,
    ) -> Self {
        let exporter = Self::start(sink, capacity, metrics, Some(spool));
        for (name, why) in evicted {
            exporter.shared.evicted(&name, why);
        }
        exporter
    }

    fn start(
        sink: Arc<dyn Sink>,
        capacity: usize,
        metrics: Arc<ExportMetrics>,
        spool: Option<Arc<Spool>>,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let (spool_tx, spool_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            wake: Notify::new(),
            metrics,
            in_flight: Mutex::new(None),
            in_flight_end: AtomicI64::new(0),
            attempting: AtomicBool::new(false),
            retries_at_start: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            outage_logged: AtomicBool::new(false),
            to_spool: Mutex::new(spool.is_some().then_some(spool_tx)),
            spool,
            stop,
            fatal: watch::channel(None).0,
            delivery: Mutex::new(None),
            writer: Mutex::new(None),
            run: format!("{:016x}", fastrand::u64(..)),
            seq: AtomicU64::new(0),
            tally: Tally::default(),
        });
        let delivery = deliver(shared.clone(), sink.clone(), stop_rx);
        *lock(&shared.delivery) = Some(guarded(&shared, "delivery", delivery));
        if shared.spool.is_some() {
            let writer = write_spool(shared.clone(), sink, spool_rx);
            *lock(&shared.writer) = Some(guarded(&shared, "spool writer", writer));
        }
        Self { shared }
    }

    /// Queues `batch` without waiting, after giving it its id. Returns false when a window was lost to
    /// make room (with a spool, the oldest goes to disk instead and this returns true).
    pub fn submit(&self, mut batch: Batch) -> bool {
        let s = &self.shared;
        let id = format!("{}-{}", s.run, s.seq.fetch_add(1, Ordering::Relaxed));
        batch.heartbeat.insert(BATCH_ID_KEY, id);
        s.tally.produced.fetch_add(1, Ordering::Relaxed);
        let batch = Arc::new(batch);
        if s.spool.is_some() && s.backend_failing() {
            // The backend is down: straight to disk, where a crash cannot take it.
            if !s.outage_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "the backend is failing: windows go to the disk spool until it answers"
                );
            }
            s.spool_batch(batch);
            return true;
        }
        let mut pushed_out = Vec::new();
        {
            let mut queue = lock(&s.queue);
            while queue.len() >= s.capacity {
                pushed_out.extend(queue.pop_front());
            }
            queue.push_back(batch);
        }
        let mut kept = true;
        for old in pushed_out {
            if s.spool.is_some() {
                s.spool_batch(old);
            } else {
                kept = false;
                s.lose(
                    &old,
                    &s.metrics.dropped_queue_full,
                    "queue_full",
                    &format!("the export queue holds {} windows", s.capacity),
                );
            }
        }
        s.wake.notify_one();
        kept
    }

    /// Batches waiting in memory (not counting the one being delivered nor the spool).
    pub fn queued(&self) -> usize {
        lock(&self.shared.queue).len()
    }

    /// End of the oldest window produced but not yet delivered (queued, in flight or spooled), ns since
    /// the epoch.
    pub fn oldest_undelivered_end(&self) -> Option<i64> {
        let s = &self.shared;
        let queued = lock(&s.queue).front().map(|b| b.end_unix_nanos);
        let in_flight = s.in_flight_end.load(Ordering::Relaxed);
        let spooled = s.spool.as_ref().and_then(|sp| sp.oldest_end());
        [(in_flight != 0).then_some(in_flight), queued, spooled]
            .into_iter()
            .flatten()
            .min()
    }

    /// The counters this exporter updates.
    pub fn metrics(&self) -> &Arc<ExportMetrics> {
        &self.shared.metrics
    }

    /// Resolves when a task of the exporter has died, with what happened: windows would pile up
    /// unsent, so the daemon must exit non-zero and let its supervisor restart it.
    pub async fn failed(&self) -> String {
        let mut fatal = self.shared.fatal.subscribe();
        match fatal.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => std::future::pending().await,
        }
    }

    /// What killed a task of the exporter, if one died.
    pub fn fatal(&self) -> Option<String> {
        self.shared.fatal.borrow().clone()
    }

    /// Waits until the queue is empty and no live window is in flight, or `timeout` passes. Returns true
    /// when drained. With a spool, also stops waiting once the backend is failing: the spool keeps the
    /// rest, and a stop should not wait on a dead backend.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let s = &self.shared;
        let deadline = Instant::now() + timeout;
        loop {
            if self.queued() == 0 && lock(&s.in_flight).is_none() {
                return true;
            }
            if (s.spool.is_some() && s.backend_failing()) || Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops: flushes for at most `timeout`, then stops the delivery task, spools (or, without a
    /// spool, drops and counts as `shutdown_timeout`) what is still queued or in flight, waits for the
    /// spool writes, and returns where this run's windows ended.
    pub async fn shutdown(&self, timeout: Duration) -> ExportSummary {
        let s = &self.shared;
        let flushed = self.flush(timeout).await;
        let _ = s.stop.send(true);
        let delivery = lock(&s.delivery).take();
        if let Some(task) = delivery {
            let _ = task.await;
        }
        let mut left: Vec<Arc<Batch>> = lock(&s.in_flight).take().into_iter().collect();
        left.extend(lock(&s.queue).drain(..));
        for batch in left {
            if s.spool.is_some() {
                s.spool_batch(batch);
            } else {
                s.lose(
                    &batch,
                    &s.metrics.dropped_shutdown_timeout,
                    "shutdown_timeout",
                    &format!("not delivered within {timeout:?} of the stop signal"),
                );
            }
        }
        // Closing the channel ends the writer once it has written everything sent before.
        lock(&s.to_spool).take();
        let writer = lock(&s.writer).take();
        if let Some(task) = writer {
            let _ = task.await;
        }
        let spooled = s.spool.as_ref().map_or(0, |sp| sp.count_run(&s.run));
        s.tally.summary(flushed, spooled)
    }
}

impl Shared {
    /// Whether the backend is failing now: the last attempt spent its retries, or the attempt under
    /// way has already had to retry.
    fn backend_failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
            || (self.attempting.load(Ordering::Relaxed)
                && ExportMetrics::get(&self.metrics.retries)
                    > self.retries_at_start.load(Ordering::Relaxed))
    }

    fn begin_attempt(&self) {
        self.retries_at_start
            .store(ExportMetrics::get(&self.metrics.retries), Ordering::Relaxed);
        self.attempting.store(true, Ordering::Relaxed);
    }

    fn end_attempt(&self, ok: bool) {
        self.attempting.store(false, Ordering::Relaxed);
        self.failing.store(!ok, Ordering::Relaxed);
        if ok && self.outage_logged.swap(false, Ordering::Relaxed) {
            tracing::info!(
                "the backend answers again: replaying the spooled windows, oldest first"
            );
        }
    }

    fn is_own(&self, id: &str) -> bool {
        id.starts_with(&self.run)
    }

    /// Hands `batch` to the spool writer (or counts it lost when the writer is closed).
    fn spool_batch(&self, batch: Arc<Batch>) {
        let sent = match &*lock(&self.to_spool) {
            Some(tx) => tx.send(batch).map_err(|e| e.0),
            None => Err(batch),
        };
        if let Err(batch) = sent {
            self.lose(
                &batch,
                &self.metrics.dropped_shutdown_timeout,
                "shutdown_timeout",
                "the spool was already closed",
            );
        }
    }

    /// Counts a lost batch under `counter` and says why.
    fn lose(&self, batch: &Batch, counter: &AtomicU64, reason: &str, why: &str) {
        let id = batch.heartbeat.get(BATCH_ID_KEY).unwrap_or_default();
        self.lose_id(id, batch.end_unix_nanos, counter, reason, why);
    }

    fn lose_id(&self, id: &str, end_unix_nanos: i64, counter: &AtomicU64, reason: &str, why: &str) {
        ExportMetrics::add(counter, 1);
        self.tally.lost(self.is_own(id));
        tracing::warn!(
            reason,
            batch_id = id,
            window_end_unix_nanos = end_unix_nanos,
            "window lost: {why}"
        );
    }

    /// Counts a batch the spool's bounds dropped.
    fn evicted(&self, name: &str, why: Evicted) {
        let (counter, reason, text) = match why {
            Evicted::Full => (
                &self.metrics.dropped_spool_full,
                "spool_full",
                "the spool reached --spool-max-mib; dropped its oldest window",
            ),
            Evicted::Expired => (
                &self.metrics.dropped_spool_expired,
                "spool_expired",
                "the spooled window is older than spool_max_age_secs",
            ),
        };
        let end = name
            .split('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        self.lose_id(spool::batch_id(name), end, counter, reason, text);
    }

    fn delivered(&self, id: &str, end_unix_nanos: Option<i64>, outcome: &ExportOutcome) {
        let m = &self.metrics;
        ExportMetrics::add(&m.batches_sent, 1);
        ExportMetrics::add(&m.requests_sent, outcome.requests);
        ExportMetrics::add(&m.bytes_sent, outcome.bytes);
        if outcome.rejected_profiles > 0 {
            ExportMetrics::add(&m.partial_rejected_profiles, outcome.rejected_profiles);
        }
        if let Some(end) = end_unix_nanos {
            let lag = crate::clock::unix_nanos_now().saturating_sub(end);
            ExportMetrics::set(
                &m.last_ingest_lag_ms,
                u64::try_from(lag / 1_000_000).unwrap_or(0),
            );
        }
        self.tally.delivered(self.is_own(id));
    }

    /// Settles a live batch's export.
    fn settle_live(
        &self,
        batch: Arc<Batch>,
        result: Result<ExportOutcome, ExportError>,
        sink: &str,
    ) {
        let m = &self.metrics;
        let id = batch.heartbeat.get(BATCH_ID_KEY).unwrap_or_default();
        match result {
            Ok(outcome) => {
                self.end_attempt(true);
                self.delivered(id, Some(batch.end_unix_nanos), &outcome);
            }
            Err(err) => {
                let transient = spool::replay::is_transient(&err);
                self.end_attempt(!transient);
                let why = format!("{sink}: {}", crate::metadata::error_chain(&err));
                match &err {
                    _ if transient && self.spool.is_some() => {
                        tracing::warn!(batch_id = id, error = %why, "backend failing: window spooled");
                        self.spool_batch(batch);
                        // The queued windows would each wait out a retry budget too: to disk now.
                        let queued: Vec<_> = lock(&self.queue).drain(..).collect();
                        for batch in queued {
                            self.spool_batch(batch);
                        }
                    }
                    ExportError::RetriesExhausted { .. } => self.lose(
                        &batch,
                        &m.dropped_retries_exhausted,
                        "retries_exhausted",
                        &why,
                    ),
                    ExportError::Io { .. } | ExportError::Storage(_) => {
                        self.lose(&batch, &m.dropped_write_failed, "write_failed", &why)
                    }
                    _ => self.lose(&batch, &m.dropped_rejected, "rejected", &why),
                }
            }
        }
    }

    /// Settles one replay step; returns true when the delivery loop should pause before the next.
    fn settle_replay(&self, replayed: Replayed) -> bool {
        let m = &self.metrics;
        match replayed {
            Replayed::Empty => false,
            Replayed::Delivered { id, outcome } => {
                self.end_attempt(true);
                ExportMetrics::add(&m.replayed, 1);
                self.delivered(&id, None, &outcome);
                if self.spool.as_ref().is_some_and(|s| s.oldest().is_none()) {
                    tracing::info!(
                        replayed_total = ExportMetrics::get(&m.replayed),
                        "the spool is empty: every spooled window was delivered"
                    );
                }
                false
            }
            Replayed::Failed(err) => {
                self.end_attempt(false);
                tracing::warn!(error = %crate::metadata::error_chain(&err), "backend still failing: spooled windows wait");
                true
            }
            Replayed::Rejected { id, error } => {
                self.end_attempt(true);
                let why = crate::metadata::error_chain(&error).to_string();
                self.lose_id(&id, 0, &m.dropped_rejected, "rejected", &why);
                false
            }
            Replayed::Quarantined { id, error } => {
                // Counted under sonde_export_spool_quarantined_files_total by the spool.
                self.tally.lost(self.is_own(&id));
                tracing::warn!(
                    reason = "corrupt",
                    batch_id = id,
                    error = %error,
                    "window lost: its spool file is damaged and was set aside"
                );
                false
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Spawns `task`, turning a panic into the exporter's fatal error.
fn guarded(
    shared: &Arc<Shared>,
    name: &'static str,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    use futures_util::FutureExt as _;
    let shared = shared.clone();
    tokio::spawn(async move {
        if let Err(panic) = std::panic::AssertUnwindSafe(task).catch_unwind().await {
            let what = crate::telemetry::panic_message(panic.as_ref());
            shared
                .fatal
                .send_replace(Some(format!("the export {name} task panicked: {what}")));
        }
    })
}

/// Resolves once the stop is requested.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn deliver(shared: Arc<Shared>, sink: Arc<dyn Sink>, mut stop: watch::Receiver<bool>) {
    let mut replay_turn = false;
    loop {
        let wake = shared.wake.notified();
        if *stop.borrow() {
            return;
        }
        let spooled = shared.spool.as_ref().filter(|s| s.oldest().is_some());
        let live = if replay_turn && spooled.is_some() {
            None
        } else {
            let mut queue = lock(&shared.queue);
            let next = queue.pop_front();
            if let Some(batch) = &next {
                *lock(&shared.in_flight) = Some(batch.clone());
                shared
                    .in_flight_end
                    .store(batch.end_unix_nanos, Ordering::Relaxed);
            }
            next
        };
        if let Some(batch) = live {
            replay_turn = true;
            shared.begin_attempt();
            let result = tokio::select! {
                r = sink.export(&batch) => r,
                // The stop takes the in-flight batch (it stays in `in_flight`) to the spool.
                () = stopped(&mut stop) => return,
            };
            lock(&shared.in_flight).take();
            shared.in_flight_end.store(0, Ordering::Relaxed);
            shared.settle_live(batch, result, sink.name());
            continue;
        }
        if let (Some(spool), Some(spoolable)) = (spooled, sink.spoolable()) {
            replay_turn = false;
            shared.begin_attempt();
            let replayed = tokio::select! {
                r = spool::replay::replay_oldest(spool, spoolable) => r,
                // An interrupted replay leaves its file in place.
                () = stopped(&mut stop) => return,
            };
            if shared.settle_replay(replayed) {
                tokio::select! {
                    () = tokio::time::sleep(REPLAY_PAUSE) => {}
                    () = stopped(&mut stop) => return,
                }
            }
            continue;
        }
        tokio::select! {
            () = wake => {}
            () = stopped(&mut stop) => return,
        }
    }
}

/// The spool writer: encodes and stores each batch it is handed, in order, off the async threads.
async fn write_spool(
    shared: Arc<Shared>,
    sink: Arc<dyn Sink>,
    mut batches: mpsc::UnboundedReceiver<Arc<Batch>>,
) {
    let Some(spool) = shared.spool.clone() else {
        return;
    };
    let m = shared.metrics.clone();
    while let Some(batch) = batches.recv().await {
        let (sink, spool, b) = (sink.clone(), spool.clone(), batch.clone());
        let stored = tokio::task::spawn_blocking(move || {
            let Some(spoolable) = sink.spoolable() else {
                return Err((false, format!("the {} sink has no spool", sink.name())));
            };
            let spooled = SpooledBatch {
                batch_id: b.heartbeat.get(BATCH_ID_KEY).unwrap_or_default().to_owned(),
                start_unix_nanos: b.start_unix_nanos,
                end_unix_nanos: b.end_unix_nanos,
                requests: spoolable.encode(&b),
            };
            spool
                .store(&spooled)
                .map_err(|e| (matches!(e, SpoolError::TooLarge { .. }), e.to_string()))
        })
        .await
        .unwrap_or_else(|join| Err((false, format!("the spool writer failed: {join}"))));
        match stored {
            Ok(evicted) => {
                ExportMetrics::add(&m.spooled, 1);
                for (name, why) in evicted {
                    shared.evicted(&name, why);
                }
                shared.wake.notify_one();
            }
            Err((true, why)) => shared.lose(&batch, &m.dropped_spool_full, "spool_full", &why),
            Err((false, why)) => shared.lose(&batch, &m.dropped_write_failed, "write_failed", &why),
        }
    }
}
