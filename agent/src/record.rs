//! `sonde record`: profile for a fixed duration, write one gzip pprof (and optionally folded stacks and a
//! flame graph), print a summary.

use std::{
    fs::File,
    io::Write as _,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::{Context as _, bail};
use sonde_abi::{OffCpuKind, stat};

use crate::{
    bpf::{
        drain::{WALK_OUTCOMES, WindowStats},
        loader::{LoadOptions, OffCpuOptions},
    },
    profile::{Profile, folded, pprof},
    sampler::{Sampler, Window},
    symbolize::{SymbolArgs, Symbolizer, debuginfo::DebugInfo, offenders},
    unwind::UnwindArgs,
};

/// Which profile `record` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileChoice {
    /// On-CPU samples (perf cpu-clock).
    Cpu,
    /// Time blocked off-CPU (sched_switch).
    Offcpu,
}

/// Which off-CPU episodes count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OffCpuChoice {
    /// Blocked in a sleeping state: waiting on locks, sleeps, I/O.
    Voluntary,
    /// Preempted while runnable: waiting for a CPU.
    Involuntary,
}

/// Largest accepted `--min-block-us`: ten seconds. A larger threshold would hide every episode.
const MAX_MIN_BLOCK_US: u64 = 10_000_000;

/// Arguments of `sonde record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Seconds to profile.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration: u64,
    /// Process to profile (repeatable); all processes when absent.
    #[arg(long = "pid")]
    pub pids: Vec<u32>,
    /// On-CPU sampling frequency per CPU, in Hz (cpu profile only; default 99).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub frequency: Option<u64>,
    /// Which profile to take.
    #[arg(long, value_enum, default_value = "cpu")]
    pub profile: ProfileChoice,
    /// Off-CPU: shortest blocking episode counted, in microseconds.
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub min_block_us: u64,
    /// Off-CPU: voluntary blocking (default) or involuntary preemption.
    #[arg(long, value_enum, default_value = "voluntary")]
    pub offcpu_kind: OffCpuChoice,
    /// Off-CPU: stack walks per CPU per second; above it episodes are sampled, weighted so totals
    /// stay unbiased (0: every episode, exact counts).
    #[arg(long, default_value_t = crate::bpf::loader::DEFAULT_OFFCPU_BUDGET,
          value_parser = clap::value_parser!(u32).range(0..=crate::sampler::MAX_OFFCPU_BUDGET))]
    pub offcpu_budget: u32,
    /// Output file (gzip pprof).
    #[arg(long)]
    pub output: PathBuf,
    /// Also write folded stacks here.
    #[arg(long)]
    pub folded: Option<PathBuf>,
    /// Also write an SVG flame graph here.
    #[arg(long)]
    pub flamegraph: Option<PathBuf>,
    /// Stack unwinding.
    #[command(flatten)]
    pub unwind: UnwindArgs,
    /// Symbols of stripped binaries.
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

/// Runs `sonde record`.
pub fn run(args: RecordArgs) -> anyhow::Result<ExitCode> {
    let options = validate(&args)?;
    // Every output is opened before sampling starts, so a bad path costs nothing.
    let outputs = Outputs::open(&args)?;
    let symbols = args.symbols.config()?;
    // One window only: debug files still being fetched when it ends are waited for (one request's
    // timeout and a little more, so a timed-out fetch is reported as failed, not pending), or the
    // recording would keep addresses the cache is about to name.
    let wait = symbols
        .debuginfod
        .as_ref()
        .map_or(Duration::ZERO, |d| d.timeout + Duration::from_millis(500));
    let debug = DebugInfo::new(symbols)?;
    let symbolizer = Symbolizer::new(debug, Some(wait), options.runtimes);
    // One recording: nothing to keep tables for.
    let mut sampler = Sampler::start(options, symbolizer, None)?;
    crate::stop_signal::install();
    tracing::info!(duration_s = args.duration, profile = ?args.profile, "recording (Ctrl-C ends early)");
    if crate::stop_signal::sleep(Duration::from_secs(args.duration)) {
        tracing::info!("stopped by signal; writing what was recorded");
    }
    let window = sampler.window().context("draining the kernel maps")?;
    let profile = match args.profile {
        ProfileChoice::Cpu => window.on_cpu.as_ref(),
        ProfileChoice::Offcpu => window.off_cpu.as_ref(),
    }
    .context("the sampler produced no profile of the requested kind")?;
    outputs.write(profile)?;
    print_summary(&window, profile, &args.output);
    sampler.stop();
    Ok(ExitCode::SUCCESS)
}

fn validate(args: &RecordArgs) -> anyhow::Result<LoadOptions> {
    for pid in &args.pids {
        if !crate::process::proc_dir(*pid).exists() {
            bail!("process {pid} does not exist (no /proc/{pid}); check the --pid value");
        }
    }
    let mut options = LoadOptions {
        pids: args.pids.clone(),
        single_window: true,
        unwind: args.unwind.unwind,
        max_unwind_table_mib: args.unwind.max_unwind_table_mib,
        runtimes: args.unwind.runtimes(),
        ..Default::default()
    };
    match args.profile {
        ProfileChoice::Cpu => options.frequency_hz = Some(args.frequency.unwrap_or(99)),
        ProfileChoice::Offcpu => {
            if let Some(hz) = args.frequency {
                bail!(
                    "--frequency {hz} does not apply to --profile offcpu: off-CPU time is measured at every context switch, not sampled; drop --frequency"
                );
            }
            if args.min_block_us > MAX_MIN_BLOCK_US {
                bail!(
                    "--min-block-us {} is too large: it would hide every blocking episode shorter than {} s (maximum {MAX_MIN_BLOCK_US})",
                    args.min_block_us,
                    args.min_block_us / 1_000_000
                );
            }
            options.frequency_hz = None;
            options.off_cpu = Some(OffCpuOptions {
                kind: match args.offcpu_kind {
                    OffCpuChoice::Voluntary => OffCpuKind::Voluntary,
                    OffCpuChoice::Involuntary => OffCpuKind::Involuntary,
                },
                min_block: Duration::from_micros(args.min_block_us),
                budget: args.offcpu_budget,
            });
        }
    }
    Ok(options)
}

/// The output files, written under temporary names and renamed into place only when all are written:
/// a recording that fails leaves any existing output as it was.
struct Outputs {
    pprof: Pending,
    folded: Option<Pending>,
    flamegraph: Option<Pending>,
}

/// A file being written next to its final path: created with `O_EXCL` under a fresh temporary name
/// in the same directory (so the rename is atomic), removed unless committed.
struct Pending {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl Pending {
    /// Opens the temporary file for `path`; `what` names the output in the error.
    fn create(path: &Path, what: &str) -> anyhow::Result<Self> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = path
            .file_name()
            .with_context(|| format!("the {what} path {} names no file", path.display()))?;
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_file_name(format!(
            ".{}.sonde-{}-{seq}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| {
                format!(
                    "cannot write the {what} next to {}: choose a writable directory",
                    path.display()
                )
            })?;
        Ok(Self {
            path: path.to_owned(),
            tmp,
            file: Some(file),
        })
    }

    fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("a pending output's file is taken only by commit")
    }

    /// Makes the file durable and gives it its final name.
    fn commit(mut self) -> anyhow::Result<()> {
        let file = self.file.take().expect("committed once");
        file.sync_all()
            .and_then(|()| std::fs::rename(&self.tmp, &self.path))
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.file.is_some() {
            // Not committed: the recording failed, and the final path keeps what it had.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Outputs {
    fn open(args: &RecordArgs) -> anyhow::Result<Self> {
        Ok(Self {
            pprof: Pending::create(&args.output, "profile")?,
            folded: args
                .folded
                .as_deref()
                .map(|p| Pending::create(p, "folded stacks"))
                .transpose()?,
            flamegraph: args
                .flamegraph
                .as_deref()
                .map(|p| Pending::create(p, "flame graph"))
                .transpose()?,
        })
    }

    /// Writes every output, then renames them all into place; on any failure none is renamed.
    fn write(mut self, profile: &Profile) -> anyhow::Result<()> {
        let path = self.pprof.path.clone();
        self.pprof
            .file()
            .write_all(&pprof::encode_gzip(profile))
            .with_context(|| format!("writing {}", path.display()))?;
        let lines = folded::folded_lines(profile, 0);
        if let Some(out) = &mut self.folded {
            let path = out.path.clone();
            out.file()
                .write_all(lines.join("\n").as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(out) = &mut self.flamegraph {
            let title = format!("sonde {} profile", profile.kind.name());
            if lines.is_empty() {
                bail!(
                    "no samples were collected, so no flame graph was written to {} (and no other output)",
                    out.path.display()
                );
            }
            let path = out.path.clone();
            folded::write_flamegraph(&lines, &title, out.file())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        self.pprof.commit()?;
        for out in [self.folded, self.flamegraph].into_iter().flatten() {
            out.commit()?;
        }
        Ok(())
    }
}

fn print_summary(window: &Window, profile: &Profile, output: &Path) {
    let k = &window.stats.kernel;
    let sym = window.symbolize;
    let capture = window.capture;
    let samples: i64 = profile
        .samples
        .iter()
        .map(|s| {
            s.values[match profile.kind {
                crate::profile::ProfileKind::Cpu => 0,
                crate::profile::ProfileKind::OffCpu => 1,
            }]
        })
        .sum();
    let processes: std::collections::HashSet<u32> = profile.samples.iter().map(|s| s.pid).collect();
    let map_bytes = window.kernel_cost.map_bytes;
    let (runs, run_time) = window.kernel_cost.total();
    let mut out = String::new();
    let mut line = |key: &str, value: String| out.push_str(&format!("{key:<28}{value}\n"));
    line(
        "profile:",
        format!("{} -> {}", profile.kind.name(), output.display()),
    );
    line(
        "duration_s:",
        format!("{:.2}", profile.duration_nanos as f64 / 1e9),
    );
    line("samples:", samples.to_string());
    line("processes:", processes.len().to_string());
    line(
        "symbolized_frames:",
        format!("{:.1}%", 100.0 * sym.symbolized_ratio()),
    );
    line(
        "truncated_stacks:",
        format!("{:.1}%", 100.0 * sym.truncated_ratio()),
    );
    line(
        "lost_samples:",
        (window.stats.lost_samples() + k[stat::OFFCPU_MAP_FULL as usize]).to_string(),
    );
    line(
        "stack_collisions:",
        (k[stat::USER_STACK_COLLISION as usize] + k[stat::KERNEL_STACK_COLLISION as usize])
            .to_string(),
    );
    line(
        "stack_errors:",
        (k[stat::USER_STACK_ERROR as usize]
            + k[stat::KERNEL_STACK_ERROR as usize]
            + window.stats.stacks_missing)
            .to_string(),
    );
    line(
        "process_events_lost:",
        k[stat::PROC_EVENTS_LOST as usize].to_string(),
    );
    line("processes_gone:", capture.gone.to_string());
    line("python_processes:", capture.python_processes.to_string());
    line(
        "python_unsupported:",
        capture.python_unsupported.to_string(),
    );
    let unmapped = window.symbolize.unmapped;
    line("unmapped_process_gone:", unmapped.process_gone.to_string());
    line(
        "unmapped_outside_mappings:",
        unmapped.outside_mappings.to_string(),
    );
    line("unmapped_file_unknown:", unmapped.unknown_file.to_string());
    let go = window.symbolize.go;
    line("go_binaries:", go.binaries.to_string());
    line("go_table_failures:", go.failures.to_string());
    line(
        "go_without_inline_tree:",
        go.without_inline_tree.to_string(),
    );
    // Goroutine labels: samples labelled, cut to the bounds, unreadable, and label sets gone before
    // the drain read them; binaries whose labels cannot be read.
    for (name, index) in [
        ("go_labeled:", stat::GO_LABELED),
        ("go_labels_cut:", stat::GO_LABELS_CUT),
        ("go_labels_fault:", stat::GO_LABELS_FAULT),
    ] {
        line(name, k[index as usize].to_string());
    }
    line(
        "go_labels_missing:",
        window.stats.labels_missing.to_string(),
    );
    line(
        "go_labels_unsupported:",
        capture.go_labels_unsupported.to_string(),
    );
    if profile.kind == crate::profile::ProfileKind::OffCpu {
        line(
            "offcpu_episodes:",
            k[stat::OFFCPU_EPISODES as usize].to_string(),
        );
        line("offcpu_short:", k[stat::OFFCPU_SHORT as usize].to_string());
        line(
            "offcpu_unmatched_exit:",
            k[stat::OFFCPU_UNMATCHED_EXIT as usize].to_string(),
        );
        line(
            "offcpu_start_full:",
            k[stat::OFFCPU_START_FULL as usize].to_string(),
        );
        line(
            "offcpu_stale_stacks:",
            k[stat::OFFCPU_STALE_STACK as usize].to_string(),
        );
        line("offcpu_pending:", window.stats.off_cpu_pending.to_string());
        offcpu_sampling_summary(&mut line, k, profile);
    } else {
        line("idle_samples:", k[stat::ONCPU_IDLE as usize].to_string());
    }
    unwind_summary(&mut line, &window.stats, window.unwind);
    symbol_summary(&mut line, window);
    line(
        "program_errors:",
        k[stat::PROGRAM_ERRORS as usize].to_string(),
    );
    line("bpf_map_bytes:", map_bytes.to_string());
    let status = procfs::process::Process::myself().and_then(|me| me.status());
    let kib = |f: fn(&procfs::process::Status) -> Option<u64>| {
        status
            .as_ref()
            .ok()
            .and_then(f)
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    line("agent_peak_rss_kib:", kib(|s| s.vmhwm));
    line("agent_rss_anon_kib:", kib(|s| s.rssanon));
    line("agent_rss_file_kib:", kib(|s| s.rssfile));
    if runs > 0 {
        line("bpf_runs:", runs.to_string());
        line(
            "bpf_ns_per_run:",
            format!("{:.0}", run_time.as_nanos() as f64 / runs as f64),
        );
    }
    print!("{out}");
}

/// Where symbols came from, what debuginfod did, and the binaries left unnamed.
fn symbol_summary(line: &mut impl FnMut(&str, String), window: &Window) {
    let debug = window.debug;
    let d = &debug.client;
    line(
        "unsymbolized_top:",
        offenders::describe(&window.unsymbolized),
    );
    line("debug_files_local:", debug.local.to_string());
    line(
        "debug_files_minidebuginfo:",
        debug.minidebuginfo.to_string(),
    );
    line("debug_files_debuginfod:", debug.debuginfod.to_string());
    line(
        "debug_build_id_mismatches:",
        (debug.mismatches + d.mismatches).to_string(),
    );
    line("debuginfod_requests:", d.requests.to_string());
    line("debuginfod_fetched:", d.fetched.to_string());
    line("debuginfod_cache_hits:", d.cache_hits.to_string());
    line("debuginfod_misses:", d.misses.to_string());
    line("debuginfod_failures:", d.failures.to_string());
    line("debuginfod_bytes:", d.bytes.to_string());
    let perf = window.perf_maps;
    line("perf_map_entries:", perf.entries.to_string());
    line("perf_map_bad_lines:", perf.bad_lines.to_string());
    // Process-controlled input refused (THREAT_MODEL.md), every series as /metrics has it.
    for (input, reason, n) in crate::process::untrusted::refusals::snapshot() {
        line(&format!("refused_{input}_{reason}:"), n.to_string());
    }
}

/// How user stacks were walked: completeness, depth, every cut and fallback by reason, and the tables.
fn unwind_summary(
    line: &mut impl FnMut(&str, String),
    stats: &WindowStats,
    tables: Option<crate::unwind::UnwindStats>,
) {
    let k = &stats.kernel;
    line("walks:", stats.walks().to_string());
    line(
        "walk_root:",
        format!("{:.1}%", 100.0 * stats.walk_root_ratio()),
    );
    line(
        "walk_root_new_processes:",
        format!("{:.1}%", 100.0 * stats.new_process_root_ratio()),
    );
    // Coverage by process age: the first milliseconds of short-lived processes apart from the rest.
    for (bucket, age) in crate::bpf::drain::AGE_BUCKETS.iter().enumerate() {
        let (walks, root) = stats.walks_by_age(bucket);
        line(&format!("walks_age_{age}:"), walks.to_string());
        line(
            &format!("walk_root_age_{age}:"),
            format!("{:.1}%", 100.0 * crate::ratio::good_share(root, walks)),
        );
    }
    line(
        "frames_per_stack:",
        format!("{:.1}", stats.frames_per_stack()),
    );
    for (name, index) in WALK_OUTCOMES.iter().skip(1) {
        // Endings that are not cuts.
        let key = if matches!(*name, "fp_end" | "exiting") {
            format!("walk_{name}:")
        } else {
            format!("walk_cut_{name}:")
        };
        line(&key, k[*index as usize].to_string());
    }
    line(
        "python_frames_per_stack:",
        format!("{:.1}", stats.python_frames_per_stack()),
    );
    for (name, index) in [
        ("python_walks:", stat::PY_WALKS),
        ("python_walk_idle:", stat::PY_IDLE),
        ("python_walk_no_thread:", stat::PY_NO_THREAD),
        ("python_walk_read_fault:", stat::PY_READ_FAULT),
        ("python_walk_truncated:", stat::PY_TRUNCATED),
    ] {
        line(name, k[index as usize].to_string());
    }
    for (name, index) in [
        ("fallback_no_process:", stat::FALLBACK_NO_PROCESS),
        ("fallback_no_table:", stat::FALLBACK_NO_TABLE),
        ("fallback_no_info:", stat::FALLBACK_NO_INFO),
        ("mappings_refresh:", stat::MAPPINGS_REFRESH),
        ("vma_walks:", stat::VMA_WALKS),
        ("vma_no_table:", stat::VMA_NO_TABLE),
        ("vma_missed:", stat::VMA_MISSED),
        ("vma_record_failed:", stat::VMA_RECORD_FAILED),
    ] {
        line(name, k[index as usize].to_string());
    }
    if let Some(t) = tables {
        line("unwind_tables_built:", t.tables_built.to_string());
        line("unwind_tables_from_disk:", t.tables_from_disk.to_string());
        line("unwind_table_failures:", t.build_failures.to_string());
        line("unwind_table_evictions:", t.evictions.to_string());
        line("unwind_table_rows:", t.rows.to_string());
        line("unwind_table_bytes:", t.table_bytes.to_string());
        line("unwind_table_budget_bytes:", t.budget_bytes.to_string());
        line("unwind_table_pages:", t.pages.to_string());
        line(
            "unwind_build_ms:",
            format!("{:.0}", t.build_seconds * 1000.0),
        );
        line(
            "unwind_dropped:",
            (t.mappings_dropped + t.processes_dropped + t.requests_dropped).to_string(),
        );
    }
}

/// How off-CPU episodes were sampled: switches seen, episodes tracked (and why), walks per CPU per
/// second against the budget, and the inverse probabilities used.
fn offcpu_sampling_summary(
    line: &mut impl FnMut(&str, String),
    k: &[u64; stat::COUNT as usize],
    profile: &Profile,
) {
    let note = |key: &str| {
        profile
            .notes
            .iter()
            .find(|(k, _)| k == key)
            .map_or_else(|| "-".to_owned(), |(_, v)| v.clone())
    };
    let tracked = k[stat::OFFCPU_SWITCH_OUT as usize];
    line(
        "offcpu_switches_seen:",
        k[stat::OFFCPU_ELIGIBLE as usize].to_string(),
    );
    line("offcpu_tracked:", tracked.to_string());
    line(
        "offcpu_tracked_long:",
        k[stat::OFFCPU_TRACKED_LONG as usize].to_string(),
    );
    line(
        "offcpu_estimated_switches:",
        k[stat::OFFCPU_WEIGHT as usize].to_string(),
    );
    let cpus = aya::util::online_cpus().map_or(1, |c| c.len().max(1));
    let seconds = (profile.duration_nanos as f64 / 1e9).max(1e-3);
    line(
        "offcpu_walks_per_cpu_s:",
        format!("{:.0}", tracked as f64 / seconds / cpus as f64),
    );
    line("offcpu_budget:", note("sonde.offcpu.budget"));
    line("offcpu_one_in_min:", note("sonde.offcpu.one_in_min"));
    line("offcpu_one_in_max:", note("sonde.offcpu.one_in_max"));
}
