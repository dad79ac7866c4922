//! `sonde run`: the always-on daemon. A sampling thread ends a window every export interval; the async
//! side splits it per process, tags each profile with its workload identity (`metadata`) and hands the
//! batch to the bounded export queue (`export`), which never blocks sampling. SIGTERM/SIGINT end the
//! current window early, flush it within a bounded time and exit 0.

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
    export::{self, Batch, ExportMetrics, Exporter},
    metadata::MetadataResolver,
    profile::group,
    sampler::{Sampler, Window},
    self_stats::SelfStats,
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
    #[arg(long, default_value_t = crate::bpf::loader::DEFAULT_OFFCPU_BUDGET)]
    pub offcpu_budget: u32,
    /// Benchmark aid: log each window's size as one OTLP request and as one gzip pprof per process
    /// (encodes every window twice, so it adds CPU).
    #[arg(long, hide = true)]
    pub report_wire_bytes: bool,
    /// Stop by itself after this many seconds (as on SIGTERM); runs until a signal when absent.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub duration: Option<u64>,
    /// Stack unwinding.
    #[command(flatten)]
    pub unwind: UnwindArgs,
    /// Symbols of stripped binaries.
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

/// Runs `sonde run` until SIGTERM/SIGINT.
pub fn run(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    // Everything is validated before anything starts.
    let config = DaemonConfig::load(&args.config)?;
    let options = LoadOptions {
        frequency_hz: Some(args.frequency),
        off_cpu: args.offcpu.then_some(OffCpuOptions {
            kind: sonde_abi::OffCpuKind::Voluntary,
            min_block: Duration::from_micros(1),
            budget: args.offcpu_budget,
        }),
        unwind: args.unwind.unwind,
        max_unwind_table_mib: args.unwind.max_unwind_table_mib,
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
        args.duration.map(Duration::from_secs),
        args.report_wire_bytes,
    ))
}

async fn serve(
    config: DaemonConfig,
    options: LoadOptions,
    debug: DebugInfo,
    duration: Option<Duration>,
    report_wire_bytes: bool,
) -> anyhow::Result<ExitCode> {
    let metrics = Arc::new(ExportMetrics::default());
    let sink = export::build_sink(config.otlp.as_ref(), &config.data_dir, metrics.clone())?;
    let exporter = Exporter::spawn(sink, config.queue_capacity, metrics.clone());
    let resolver = MetadataResolver::start(config.metadata.clone()).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::channel::<Window>(2);
    let sampling = spawn_sampling(options, debug, config.export_interval, stop.clone(), tx)?;
    tracing::info!(
        interval_s = config.export_interval.as_secs(),
        destination = config
            .otlp
            .as_ref()
            .map(|o| o.endpoint.clone())
            .unwrap_or_else(|| config.data_dir.display().to_string()),
        "sonde running"
    );

    let mut stats = SelfStats::new();
    let signal = stop_signal(duration);
    tokio::pin!(signal);
    loop {
        tokio::select! {
            window = rx.recv() => match window {
                Some(window) => ship(&window, &resolver, &exporter, &mut stats, report_wire_bytes),
                None => break,
            },
            _ = &mut signal, if !stop.load(Ordering::SeqCst) => {
                tracing::info!("stopping: flushing the last window");
                stop.store(true, Ordering::SeqCst);
                sampling.thread().unpark();
            }
        }
    }
    let _ = sampling.join();
    let flushed = exporter.flush(FLUSH_TIMEOUT).await;
    exporter.close();
    tracing::info!(flushed, metrics = %metrics, "sonde stopped");
    Ok(ExitCode::SUCCESS)
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
fn spawn_sampling(
    options: LoadOptions,
    debug: DebugInfo,
    interval: Duration,
    stop: Arc<AtomicBool>,
    tx: mpsc::Sender<Window>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("sonde-sampler".into())
        .spawn(move || {
            let mut sampler = match Sampler::start(options, Symbolizer::new(debug, None)) {
                Ok(sampler) => {
                    let _ = started_tx.send(Ok(()));
                    sampler
                }
                Err(err) => {
                    let _ = started_tx.send(Err(err));
                    return;
                }
            };
            loop {
                let deadline = std::time::Instant::now() + interval;
                while !stop.load(Ordering::SeqCst) {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::park_timeout(left);
                }
                match sampler.window() {
                    Ok(window) => {
                        if tx.blocking_send(window).is_err() {
                            break;
                        }
                    }
                    Err(err) => {
                        tracing::error!(%err, "draining the kernel maps failed; window lost")
                    }
                }
                if stop.load(Ordering::SeqCst) {
                    break;
                }
            }
            sampler.stop();
        })
        .context("spawning the sampler thread")?;
    match started_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(err)) => Err(err.into()),
        Err(_) => anyhow::bail!("the sampler thread died while loading the BPF programs"),
    }
}

/// Tags the window's per-process profiles and queues them; logs the agent's own coverage and cost.
fn ship(
    window: &Window,
    resolver: &MetadataResolver,
    exporter: &Exporter,
    stats: &mut SelfStats,
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
    let batch = Batch {
        start_unix_nanos: start,
        end_unix_nanos: start + duration,
        profiles,
    };
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
    let usage = stats.sample();
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
        lost_samples = window.stats.lost_samples(),
        stacks_missing = window.stats.stacks_missing,
        walk_root_percent = format!("{:.1}", 100.0 * walk.walk_root_ratio()),
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
        cpu_percent = format!("{:.2}", usage.cpu_percent),
        rss_mib = format!("{:.1}", usage.rss_mib),
        queued = exporter.queued(),
        dropped_oldest = !accepted,
        "window"
    );
}

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as i64
}
