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
    time::{Duration, SystemTime},
};

use anyhow::Context as _;
use tokio::sync::mpsc;

use crate::{
    bpf::loader::{LoadOptions, OffCpuOptions},
    config::{DaemonConfig, RunArgs},
    export::{self, Batch, ExportMetrics, ExportSummary, Exporter, spool::Spool},
    metadata::{MetadataResolver, Tags, keys},
    metrics::{Health, LastWindow, Metrics},
    profile::group,
    sampler::{Sampler, Window},
    symbolize::{SymbolArgs, Symbolizer, debuginfo::DebugInfo, offenders},
    unwind::UnwindArgs,
};

/// How long the last window may take to reach the backend after a stop signal.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments of `sonde run`.
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// Configuration (file, export, labels).
    #[command(flatten)]
    pub config: RunArgs,
    /// On-CPU sampling frequency per CPU, in Hz.
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub frequency: u64,
    /// Also record off-CPU time (voluntary blocking, from sched_switch).
    #[arg(long)]
    pub offcpu: bool,
    /// Off-CPU: stack walks per CPU per second; above it episodes are sampled, weighted so totals
    /// stay unbiased (0: every episode, exact counts).
    #[arg(long, default_value_t = crate::bpf::loader::DEFAULT_OFFCPU_BUDGET,
          value_parser = clap::value_parser!(u32).range(0..=crate::sampler::MAX_OFFCPU_BUDGET))]
    pub offcpu_budget: u32,
    /// Benchmark aid: log each window's size as one OTLP request and as one gzip pprof per process
    /// (encodes every window twice, so it adds CPU).
    #[arg(long, hide = true)]
    pub report_wire_bytes: bool,
    /// Stop by itself after this many seconds (as on SIGTERM); runs until a signal when absent.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=366 * 86_400))]
    pub duration: Option<u64>,
    /// Stack unwinding.
    #[command(flatten)]
    pub unwind: UnwindArgs,
    /// Symbols of stripped binaries.
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Address of /metrics, /healthz and /readyz (`none`: no endpoint).
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR|none", value_parser = parse_metrics_addr)]
    pub metrics_addr: MetricsAddr,
    /// Test hook: the sampling thread stops making windows after this many (as if stuck).
    #[arg(long, hide = true)]
    pub test_stall_after_windows: Option<u64>,
    /// Test hook: the sampling thread panics after this many windows.
    #[arg(long, hide = true)]
    pub test_panic_after_windows: Option<u64>,
}

/// Drain failures in a row after which the sampling thread gives up (the maps are unusable).
const MAX_DRAIN_FAILURES: u32 = 3;

/// `--metrics-addr`: a socket address, or none.
#[derive(Clone, Copy, Debug)]
pub struct MetricsAddr(pub Option<std::net::SocketAddr>);

fn parse_metrics_addr(s: &str) -> Result<MetricsAddr, String> {
    if s == "none" {
        return Ok(MetricsAddr(None));
    }
    s.parse()
        .map(|a| MetricsAddr(Some(a)))
        .map_err(|_| format!("{s:?} is not ADDR:PORT (e.g. 127.0.0.1:9464 or [::]:9464) or `none`"))
}

/// Runs `sonde run` until SIGTERM/SIGINT.
pub fn run(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    // Everything is validated before anything starts.
    let config = DaemonConfig::load(&args.config)?;
    // One proc root for process capture and metadata alike.
    crate::process::set_proc_root(&config.metadata.proc_root);
    let options = LoadOptions {
        frequency_hz: Some(args.frequency),
        off_cpu: args.offcpu.then_some(OffCpuOptions {
            kind: sonde_abi::OffCpuKind::Voluntary,
            min_block: Duration::from_micros(1),
            budget: args.offcpu_budget,
        }),
        unwind: args.unwind.unwind,
        max_unwind_table_mib: args.unwind.max_unwind_table_mib,
        python: args.unwind.python.on(),
        ..Default::default()
    };
    let debug = DebugInfo::new(args.symbols.with_file(&config.symbols).config()?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sonde-export")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(
        config,
        options,
        debug,
        Flags {
            duration: args.duration.map(Duration::from_secs),
            report_wire_bytes: args.report_wire_bytes,
            metrics_addr: args.metrics_addr.0,
            stall_after: args.test_stall_after_windows,
            panic_after: args.test_panic_after_windows,
        },
    ))
}

/// The run's switches that are not configuration.
struct Flags {
    duration: Option<Duration>,
    report_wire_bytes: bool,
    metrics_addr: Option<std::net::SocketAddr>,
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
    let export_metrics = Arc::new(ExportMetrics::default());
    let sink = export::build_sink(
        config.otlp.as_ref(),
        &data,
        &config.retention,
        export_metrics.clone(),
    )?;
    let exporter = match &config.otlp {
        // A remote backend gets the disk spool, opened (and checked) before anything is loaded.
        Some(_) => {
            let (spool, evicted) = Spool::open(&data, config.spool, export_metrics.clone())
                .with_context(|| {
                    format!(
                        "cannot use the spool directory in {}: fix --data-dir",
                        config.data_dir.display()
                    )
                })?;
            Exporter::spawn_spooled(
                sink,
                config.queue_capacity,
                export_metrics.clone(),
                Arc::new(spool),
                evicted,
            )
        }
        None => Exporter::spawn(sink, config.queue_capacity, export_metrics.clone()),
    };
    let local_dir = config.otlp.is_none().then(|| config.data_dir.clone());
    let metrics = Metrics::new(exporter.clone(), config.export_interval, local_dir);
    // Bound before anything is loaded: a taken port is an error at start, with nothing sampled.
    let mut http = match flags.metrics_addr {
        Some(addr) => Some(tokio::spawn(
            crate::metrics::http::bind(addr, metrics.clone()).await?,
        )),
        None => None,
    };
    let resolver = MetadataResolver::start(config.metadata.clone()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::channel::<Window>(2);
    let sampling = spawn_sampling(
        options,
        debug,
        Sampling {
            interval: config.export_interval,
            stop: stop.clone(),
            health: metrics.health.clone(),
            stall_after: flags.stall_after,
            panic_after: flags.panic_after,
        },
        tx,
    )?;
    tracing::info!(
        interval_s = config.export_interval.as_secs(),
        destination = config
            .otlp
            .as_ref()
            .map(|o| o.endpoint.clone())
            .unwrap_or_else(|| config.data_dir.display().to_string()),
        metrics_addr = flags
            .metrics_addr
            .map(|a| a.to_string())
            .unwrap_or_else(|| "none".into()),
        "sonde running"
    );

    let signal = stop_signal(flags.duration);
    tokio::pin!(signal);
    let mut fatal: Option<String> = None;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        tokio::select! {
            window = rx.recv() => {
                match window {
                    Some(window) => ship(&window, &resolver, &exporter, &metrics, flags.report_wire_bytes),
                    None => break,
                }
                continue;
            }
            _ = &mut signal, if !stopping => tracing::info!("stopping: flushing the last window"),
            reason = exporter.failed(), if !stopping => fatal = Some(reason),
            ended = ended(&mut http), if !stopping => {
                fatal = Some(format!("the metrics endpoint stopped: {ended}"));
            }
        }
        // Every arm but a window asks the sampling thread to end its window and stop.
        stop.store(true, Ordering::SeqCst);
        sampling.thread().unpark();
    }
    // The channel closes when the sampling thread ends: by the stop, or by dying.
    let sampler_end = match sampling.join() {
        Ok(Ok(())) if stop.load(Ordering::SeqCst) => None,
        Ok(Ok(())) => Some("the sampling thread ended without a stop signal".to_owned()),
        Ok(Err(err)) => Some(format!("the sampling thread failed: {err:#}")),
        Err(panic) => Some(format!(
            "the sampling thread panicked: {}",
            crate::telemetry::panic_message(panic.as_ref())
        )),
    };
    let summary = exporter.shutdown(FLUSH_TIMEOUT).await;
    let fatal = fatal.or(sampler_end).or_else(|| exporter.fatal());
    log_summary(&summary, &export_metrics);
    match fatal {
        None => Ok(ExitCode::SUCCESS),
        Some(reason) => {
            tracing::error!("{reason}; exiting non-zero so the supervisor restarts sonde");
            anyhow::bail!("{reason}")
        }
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
fn log_summary(s: &ExportSummary, metrics: &ExportMetrics) {
    if !s.adds_up() {
        tracing::error!(
            ?s,
            "export accounting does not add up: a window is unaccounted for"
        );
    }
    macro_rules! stopped {
        ($level:ident) => {
            tracing::$level!(
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
}

fn spawn_sampling(
    options: LoadOptions,
    debug: DebugInfo,
    pacing: Sampling,
    tx: mpsc::Sender<Window>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let Sampling {
        interval,
        stop,
        health,
        stall_after,
        panic_after,
    } = pacing;
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("sonde-sampler".into())
        .spawn(move || {
            let mut sampler = match Sampler::start(options, Symbolizer::new(debug, None)) {
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

/// Tags the window's per-process profiles, folds the window into the metrics, and queues the batch
/// with the agent's heartbeat; logs the agent's own coverage and cost.
fn ship(
    window: &Window,
    resolver: &MetadataResolver,
    exporter: &Exporter,
    metrics: &Metrics,
    report_wire_bytes: bool,
) {
    let mut profiles = Vec::new();
    for profile in [&window.on_cpu, &window.off_cpu].into_iter().flatten() {
        for (pid, p) in group::by_process(profile) {
            profiles.push((resolver.tags_for(pid), p));
        }
    }
    for pid in &window.exited {
        resolver.forget(*pid);
    }
    let (start, duration) = window
        .on_cpu
        .as_ref()
        .or(window.off_cpu.as_ref())
        .map(|p| (p.time_nanos, p.duration_nanos))
        .unwrap_or((now_nanos(), 0));
    let mut batch = Batch {
        start_unix_nanos: start,
        end_unix_nanos: start + duration,
        profiles,
        heartbeat: Tags::new(),
    };
    let last = metrics.record_window(window, &batch);
    batch.heartbeat = heartbeat(resolver.host_name(), window, &last);
    let samples: i64 = window
        .on_cpu
        .iter()
        .flat_map(|p| &p.samples)
        .map(|s| s.values[0])
        .sum();
    let processes = batch.profiles.len();
    if report_wire_bytes {
        let sizes = export::size::wire_sizes(&batch);
        tracing::info!(
            otlp_gzip_bytes = sizes.otlp_gzip_bytes,
            pprof_gzip_bytes = sizes.pprof_gzip_bytes,
            pprof_files = sizes.pprof_files,
            wire_samples = sizes.samples,
            "wire"
        );
    }
    let accepted = exporter.submit(batch);
    let walk = &window.stats;
    let tables = window.unwind.unwrap_or_default();
    let note = |key: &str| {
        window
            .off_cpu
            .iter()
            .flat_map(|p| &p.notes)
            .find(|(k, _)| k == key)
            .map_or_else(String::new, |(_, v)| v.clone())
    };
    tracing::info!(
        samples,
        processes,
        lost_samples = last.lost_samples,
        stacks_missing = window.stats.stacks_missing,
        walk_root_percent = format!("{:.1}", 100.0 * walk.walk_root_ratio()),
        complete_stack_percent = format!("{:.1}", 100.0 * last.coverage.complete_ratio()),
        symbolized_percent = format!("{:.1}", 100.0 * last.coverage.symbolized_ratio()),
        frames_per_stack = format!("{:.1}", walk.frames_per_stack()),
        walk_cuts = walk.walks() - walk.kernel[sonde_abi::stat::WALK_ROOT as usize],
        unwind_fallbacks = walk.fallbacks(),
        unwind_table_mib = format!("{:.1}", tables.table_bytes as f64 / 1048576.0),
        unwind_evictions = tables.evictions,
        offcpu_switches = note("sonde.offcpu.switches"),
        offcpu_tracked = note("sonde.offcpu.tracked"),
        offcpu_one_in_max = note("sonde.offcpu.one_in_max"),
        unsymbolized_top = offenders::describe(&window.unsymbolized),
        debuginfod_fetched = window.debug.client.fetched,
        debuginfod_failures = window.debug.client.failures,
        cpu_percent = format!("{:.2}", 100.0 * last.agent_cpu_per_s),
        overhead_percent = format!("{:.3}", 100.0 * last.overhead_ratio),
        rss_mib = format!("{:.1}", last.rss_bytes as f64 / 1048576.0),
        queued = exporter.queued(),
        dropped_oldest = !accepted,
        "window"
    );
}

/// The agent's identity and this window's coverage, as OTLP resource attributes: a backend counts
/// instances reporting and their coverage from them, idle windows included.
fn heartbeat(host: &str, window: &Window, last: &LastWindow) -> Tags {
    let mut t = Tags::new();
    if !host.is_empty() {
        t.insert(keys::HOST_NAME, host);
    }
    t.insert("sonde.agent.version", env!("CARGO_PKG_VERSION"));
    t.insert("sonde.window.samples", last.coverage.samples.to_string());
    t.insert("sonde.window.lost_samples", last.lost_samples.to_string());
    t.insert(
        "sonde.window.processes_seen",
        window.processes_held.to_string(),
    );
    t.insert(
        "sonde.window.processes_sampled",
        last.processes_sampled.to_string(),
    );
    t.insert(
        "sonde.coverage.complete_stack_ratio",
        format!("{:.4}", last.coverage.complete_ratio()),
    );
    t.insert(
        "sonde.coverage.symbolized_frame_ratio",
        format!("{:.4}", last.coverage.symbolized_ratio()),
    );
    t.insert(
        "sonde.overhead.cpu_ratio",
        format!("{:.6}", last.overhead_ratio),
    );
    t
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i64
}
