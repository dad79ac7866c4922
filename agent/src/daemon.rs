//! `sonde run`: the always-on daemon. A sampling thread ends a window every export interval; the async
//! side splits it per process, tags each profile with its workload identity (`metadata`) and hands the
//! batch to the bounded export queue (`export`), which never blocks sampling; with OTLP, what the backend
//! cannot take waits in the disk spool. SIGTERM/SIGINT end the current window early, flush it within a
//! bounded time (spooling the rest), log where every window ended and exit 0. A panic or fatal error of
//! the sampling thread, an export task or the metrics endpoint is logged at ERROR and exits non-zero,
//! so systemd or Kubernetes restart the agent.

use std::{
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Context as _;
use tokio::sync::mpsc;

use crate::{
    bpf::options::{LoadOptions, OffCpuOptions},
    config::{DaemonConfig, RunArgs},
    export::{self, Destinations, ExportMetrics, ExportSummary},
    metadata::MetadataResolver,
    metrics::{Health, Metrics, Watch},
    sampler::{Sampler, Window},
    symbolize::{Symbolizer, debuginfo::DebugInfo},
    targets::Targets,
};

mod json_log;
mod ship;
use json_log::JsonLog;
use ship::ship;

/// How long the last window may take to reach the backend after a stop signal.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the sampling thread may take to end its window after a stop signal. Past it the thread is
/// stuck (on input a process controls, see THREAT_MODEL.md): sonde exits without it, non-zero. With
/// [`FLUSH_TIMEOUT`] a stop stays under Kubernetes' default 30 s grace period.
const SAMPLER_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Drain failures in a row after which the sampling thread gives up (the maps are unusable).
const MAX_DRAIN_FAILURES: u32 = 3;

/// Runs `sonde run` until SIGTERM/SIGINT.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Everything is validated before anything starts.
    let config = DaemonConfig::load(&args)?;
    // One proc root for process capture and metadata alike.
    crate::process::set_proc_root(&config.metadata.proc_root);
    let sampling = config.sampling;
    let options = LoadOptions {
        off_cpu: config.offcpu.then_some(OffCpuOptions {
            kind: sonde_abi::OffCpuKind::Voluntary,
            min_block: Duration::from_micros(1),
            budget: sampling.offcpu_budget,
        }),
        ..sampling.load_options()
    };
    let debug = DebugInfo::new(args.symbols.with_file(&config.symbols).config()?)?;
    let json = config
        .summary_json
        .as_deref()
        .map(JsonLog::open)
        .transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sonde-export")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let flags = Flags {
        duration: config.duration,
        report_wire_bytes: args.report_wire_bytes,
        metrics_addr: config.metrics_addr,
        json,
        stall_after: test_hook!(args.test_stall_after_windows),
        panic_after: test_hook!(args.test_panic_after_windows),
    };
    runtime.block_on(serve(config, options, debug, flags))
}

/// The run's switches that are not configuration.
struct Flags {
    duration: Option<Duration>,
    report_wire_bytes: bool,
    metrics_addr: Option<std::net::SocketAddr>,
    json: Option<JsonLog>,
    stall_after: Option<u64>,
    panic_after: Option<u64>,
}

async fn serve(
    config: DaemonConfig,
    options: LoadOptions,
    debug: DebugInfo,
    flags: Flags,
) -> anyhow::Result<ExitCode> {
    // Checked before anything is loaded: a symlinked, foreign or world-writable data directory is an
    // error at start, not at the first window.
    let data = crate::storage::SafeDir::open_root(&config.data_dir, config.data_mode)
        .with_context(|| {
            format!(
                "cannot use the data directory {}",
                config.data_dir.display()
            )
        })?;
    // Two agents on one directory would interleave the index and prune each other's files.
    let _lock = data.try_lock(crate::storage::DATA_LOCK)?.with_context(|| {
        format!(
            "{} is in use by another running sonde: give each its own --data-dir",
            config.data_dir.display()
        )
    })?;
    // Every sink, each with its own queue, spool (opened and checked here, before anything is
    // loaded), tally and counters.
    let destinations = Destinations::open(
        &config.backends,
        &data,
        &config.retention,
        export::destinations::Limits {
            queue_capacity: config.queue_capacity,
            spool: config.spool,
        },
    )
    .with_context(|| format!("in {}", config.data_dir.display()))?;
    let local_dir = config.backends.is_empty().then(|| config.data_dir.clone());
    let metrics = Metrics::new(destinations.clone(), config.export_interval, local_dir);
    // Pod metadata comes first: the targets the endpoint lists are decided from it.
    let resolver = Arc::new(MetadataResolver::start(config.metadata.clone()).await);
    let targets = Arc::new(Targets::new(
        config.relabel.clone(),
        config.sampling.frequency_hz,
        resolver.clone(),
    ));
    // Bound before anything is loaded: a taken port is an error at start, with nothing sampled.
    let mut http = match flags.metrics_addr {
        Some(addr) => Some(tokio::spawn(
            crate::metrics::http::bind(addr, metrics.clone(), targets.clone()).await?,
        )),
        None => None,
    };
    // Built unwind tables are kept here, so a restart does not parse every binary again.
    let saved_tables = match crate::unwind::saved::SavedTables::open(&data) {
        Ok(saved) => Some(saved),
        Err(err) => {
            tracing::warn!(%err, "unwind tables are not kept across restarts");
            None
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::channel::<Window>(2);
    let sampling = spawn_sampling(
        options,
        debug,
        saved_tables,
        Sampling {
            interval: config.export_interval,
            stop: stop.clone(),
            health: metrics.health.clone(),
            stall_after: flags.stall_after,
            panic_after: flags.panic_after,
            targets: targets.clone(),
        },
        tx,
    )?;
    tracing::info!(
        interval_s = config.export_interval.as_secs(),
        destination = if config.backends.is_empty() {
            config.data_dir.display().to_string()
        } else {
            config.backends.describe().join(" ")
        },
        metrics_addr = flags
            .metrics_addr
            .map(|a| a.to_string())
            .unwrap_or_else(|| "none".into()),
        "sonde running"
    );

    let signal = stop_signal(flags.duration);
    tokio::pin!(signal);
    let mut fatal: Option<String> = None;
    let mut watchdog = tokio::time::interval(config.export_interval);
    // Set when the stop is asked: the sampling thread has until then to end its window.
    let mut stop_deadline: Option<tokio::time::Instant> = None;
    let far = tokio::time::Instant::now() + Duration::from_secs(366 * 86_400);
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        tokio::select! {
            window = rx.recv() => {
                match window {
                    Some(window) => ship(&window, &resolver, &targets, &destinations, &metrics, flags.report_wire_bytes, flags.json.as_ref()),
                    None => break,
                }
                continue;
            }
            _ = watchdog.tick(), if !stopping => match watch(&metrics.health) {
                Some(reason) => fatal = Some(reason),
                None => continue,
            },
            _ = tokio::time::sleep_until(stop_deadline.unwrap_or(far)), if stop_deadline.is_some() => {
                fatal.get_or_insert_with(|| format!(
                    "the sampling thread did not end its window within {} s of the stop",
                    SAMPLER_STOP_TIMEOUT.as_secs()
                ));
                break;
            }
            _ = &mut signal, if !stopping => tracing::info!("stopping: flushing the last window"),
            reason = destinations.failed(), if !stopping => fatal = Some(reason),
            ended = ended(&mut http), if !stopping => {
                fatal = Some(format!("the metrics endpoint stopped: {ended}"));
            }
        }
        // Every arm but a window and a quiet watchdog asks the sampling thread to end its window and
        // stop.
        stop.store(true, Ordering::SeqCst);
        sampling.thread().unpark();
        stop_deadline.get_or_insert_with(|| tokio::time::Instant::now() + SAMPLER_STOP_TIMEOUT);
    }
    // The channel closes when the sampling thread ends: by the stop, or by dying. A thread still
    // running is stuck: it is left behind (the process exit ends it), never waited for.
    let exited = tokio::time::Instant::now() + Duration::from_secs(1);
    while !sampling.is_finished() && tokio::time::Instant::now() < exited {
        // The thread closes the channel just before it returns.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sampler_end = if !sampling.is_finished() {
        Some("the sampling thread is stuck; exiting without it".to_owned())
    } else {
        match sampling.join() {
            Ok(Ok(())) if stop.load(Ordering::SeqCst) => None,
            Ok(Ok(())) => Some("the sampling thread ended without a stop signal".to_owned()),
            Ok(Err(err)) => Some(format!("the sampling thread failed: {err:#}")),
            Err(panic) => Some(format!(
                "the sampling thread panicked: {}",
                crate::telemetry::panic_message(panic.as_ref())
            )),
        }
    };
    let summaries = destinations.shutdown(FLUSH_TIMEOUT).await;
    let fatal = fatal.or(sampler_end).or_else(|| destinations.fatal());
    for (destination, (name, summary)) in destinations.iter().zip(&summaries) {
        log_summary(
            name,
            summary,
            destination.exporter.metrics(),
            flags.json.as_ref(),
        );
    }
    match fatal {
        None => Ok(ExitCode::SUCCESS),
        Some(reason) => {
            tracing::error!("{reason}; exiting non-zero so the supervisor restarts sonde");
            anyhow::bail!("{reason}")
        }
    }
}

/// The watchdog's turn: logs a stall as it begins, and returns the fatal reason when it has lasted past
/// the limit.
fn watch(health: &Health) -> Option<String> {
    match health.watch() {
        Watch::Live | Watch::Stalled => None,
        Watch::StallBegan(since) => {
            tracing::error!(
                stalled_s = since.as_secs(),
                limit_s = health.stall_limit().as_secs(),
                "the sampling thread has made no window: /healthz and /readyz fail, \
                 and sonde exits non-zero if this lasts past the limit"
            );
            None
        }
        Watch::Fatal(since) => Some(format!(
            "the sampling thread has made no window for {} s (stalled)",
            since.as_secs()
        )),
    }
}

/// Resolves when the metrics endpoint's task ends (it never should), with how.
async fn ended(http: &mut Option<tokio::task::JoinHandle<()>>) -> String {
    match http {
        Some(task) => {
            let end = task.await;
            *http = None;
            match end {
                Ok(()) => "it returned".to_owned(),
                Err(err) if err.is_panic() => format!(
                    "it panicked: {}",
                    crate::telemetry::panic_message(err.into_panic().as_ref())
                ),
                Err(err) => err.to_string(),
            }
        }
        None => std::future::pending().await,
    }
}

/// The exit summary: where every window of this run ended (produced = delivered + spooled + lost),
/// and what was delivered or dropped of earlier runs' spooled windows.
fn log_summary(sink: &str, s: &ExportSummary, metrics: &ExportMetrics, json: Option<&JsonLog>) {
    if let Some(log) = json {
        let export: serde_json::Map<String, serde_json::Value> = metrics
            .snapshot()
            .into_iter()
            .map(|(name, reason, v)| {
                let key = reason.map_or_else(|| name.to_owned(), |r| format!("{name}/{r}"));
                (key, v.into())
            })
            .collect();
        log.write(serde_json::json!({
            "event": "stopped",
            "sink": sink,
            "windows_produced": s.produced,
            "windows_delivered": s.delivered,
            "windows_spooled": s.spooled,
            "windows_lost": s.lost,
            "earlier_windows_delivered": s.earlier_delivered,
            "earlier_windows_lost": s.earlier_lost,
            "flushed": s.flushed,
            "export": export,
        }));
    }
    if !s.adds_up() {
        tracing::error!(
            ?s,
            "export accounting does not add up: a window is unaccounted for"
        );
    }
    macro_rules! stopped {
        ($level:ident) => {
            tracing::$level!(
                sink,
                windows_produced = s.produced,
                windows_delivered = s.delivered,
                windows_spooled = s.spooled,
                windows_lost = s.lost,
                earlier_windows_delivered = s.earlier_delivered,
                earlier_windows_lost = s.earlier_lost,
                flushed = s.flushed,
                metrics = %metrics,
                "sonde stopped"
            )
        };
    }
    if s.lost > 0 {
        stopped!(warn);
    } else {
        stopped!(info);
    }
}

/// Resolves on SIGTERM, SIGINT, or after `duration`.
async fn stop_signal(duration: Option<Duration>) {
    use tokio::signal::unix::{SignalKind, signal};
    let deadline = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = deadline => {}
    }
}

/// The sampling thread: one window per interval (or earlier on stop), sent to the async side. The
/// sampler lives on this thread (blazesym's symbolizer is not `Send`); a load failure is returned here.
/// How the sampling thread paces itself and reports its health.
struct Sampling {
    interval: Duration,
    stop: Arc<AtomicBool>,
    health: Arc<Health>,
    stall_after: Option<u64>,
    panic_after: Option<u64>,
    /// The relabel rules' targets, decided by the sampler's event thread.
    targets: Arc<Targets>,
}

fn spawn_sampling(
    options: LoadOptions,
    debug: DebugInfo,
    saved_tables: Option<crate::unwind::saved::SavedTables>,
    pacing: Sampling,
    tx: mpsc::Sender<Window>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let Sampling {
        interval,
        stop,
        health,
        stall_after,
        panic_after,
        targets,
    } = pacing;
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("sonde-sampler".into())
        .spawn(move || {
            let symbolizer = Symbolizer::new(debug, None, options.runtimes);
            let mut sampler = match Sampler::start(options, symbolizer, saved_tables, Some(targets)) {
                Ok(sampler) => {
                    health.set_attached();
                    let _ = started_tx.send(Ok(()));
                    sampler
                }
                Err(err) => {
                    let _ = started_tx.send(Err(err));
                    return Ok(());
                }
            };
            let mut windows = 0u64;
            let mut failures = 0u32;
            loop {
                if let Some(n) = panic_after.filter(|n| windows >= *n) {
                    panic!("test hook: the sampling thread panics after {n} windows");
                }
                if stall_after.is_some_and(|n| windows >= n) {
                    tracing::warn!("test hook: the sampling thread stalls");
                    while !stop.load(Ordering::SeqCst) {
                        std::thread::park();
                    }
                    break;
                }
                let deadline = std::time::Instant::now() + interval;
                while !stop.load(Ordering::SeqCst) {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::park_timeout(left);
                }
                windows += 1;
                match sampler.window() {
                    Ok(window) => {
                        failures = 0;
                        health.beat();
                        if tx.blocking_send(window).is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        failures += 1;
                        tracing::error!(%err, failures, "draining the kernel maps failed; window lost");
                        if failures >= MAX_DRAIN_FAILURES {
                            sampler.stop();
                            return Err(anyhow::Error::new(err).context(format!(
                                "draining the kernel maps failed {failures} times in a row"
                            )));
                        }
                    }
                }
                if stop.load(Ordering::SeqCst) {
                    break;
                }
            }
            sampler.stop();
            Ok(())
        })
        .context("spawning the sampler thread")?;
    match started_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(err)) => Err(err.into()),
        Err(_) => anyhow::bail!("the sampler thread died while loading the BPF programs"),
    }
}
