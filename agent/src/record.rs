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
use sonde_abi::OffCpuKind;

use crate::{
    bpf::options::{LoadOptions, OffCpuOptions},
    config::{SamplingArgs, SymbolArgs, ranges},
    figures::{Input, Running, Usage, summary_lines},
    profile::{Profile, folded, pprof},
    sampler::{Sampler, Window},
    symbolize::{Symbolizer, debuginfo::DebugInfo, offenders},
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

/// Arguments of `sonde record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Seconds to profile (1 to 86400).
    #[arg(long)]
    pub duration: u64,
    /// Process to profile (repeatable); all processes when absent.
    #[arg(long = "pid")]
    pub pids: Vec<u32>,
    /// Which profile to take.
    #[arg(long, value_enum, default_value = "cpu")]
    pub profile: ProfileChoice,
    /// Off-CPU: shortest blocking episode counted, in microseconds (at most 10 s).
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub min_block_us: u64,
    /// Off-CPU: voluntary blocking (default) or involuntary preemption.
    #[arg(long, value_enum, default_value = "voluntary")]
    pub offcpu_kind: OffCpuChoice,
    /// Output file (gzip pprof).
    #[arg(long)]
    pub output: PathBuf,
    /// Also write folded stacks here.
    #[arg(long)]
    pub folded: Option<PathBuf>,
    /// Also write an SVG flame graph here.
    #[arg(long)]
    pub flamegraph: Option<PathBuf>,
    /// Also write the summary's figures here as one JSON object (`-`: on stdout, instead of the
    /// text summary).
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
    /// Sampling and unwinding, as `run` has them.
    #[command(flatten)]
    pub sampling: SamplingArgs,
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
    let mut sampler = Sampler::start(options, symbolizer, None, None)?;
    crate::stop_signal::install();
    tracing::info!(duration_s = args.duration, profile = ?args.profile, "recording (Ctrl-C ends early)");
    if crate::stop_signal::sleep(Duration::from_secs(args.duration)) {
        tracing::info!("stopped by signal; writing what was recorded");
    }
    let window = sampler.last_window().context("draining the kernel maps")?;
    let profile = match args.profile {
        ProfileChoice::Cpu => window.on_cpu.as_ref(),
        ProfileChoice::Offcpu => window.off_cpu.as_ref(),
    }
    .context("the sampler produced no profile of the requested kind")?;
    outputs.write(profile)?;
    summary(&window, profile, &args)?;
    sampler.stop();
    Ok(ExitCode::SUCCESS)
}

fn validate(args: &RecordArgs) -> anyhow::Result<LoadOptions> {
    ranges::RECORD_DURATION_SECS.check(args.duration)?;
    for pid in &args.pids {
        if !crate::process::proc_dir(*pid).exists() {
            bail!("process {pid} does not exist (no /proc/{pid}); check the --pid value");
        }
    }
    let sampling = args.sampling.resolve_flags()?;
    let mut options = LoadOptions {
        pids: args.pids.clone(),
        single_window: true,
        ..sampling.load_options()
    };
    match args.profile {
        ProfileChoice::Cpu => options.frequency_hz = Some(sampling.frequency_hz),
        ProfileChoice::Offcpu => {
            if let Some(hz) = args.sampling.frequency {
                bail!(
                    "--frequency {hz} does not apply to --profile offcpu: off-CPU time is measured at every context switch, not sampled; drop --frequency"
                );
            }
            if ranges::MIN_BLOCK_US.check(args.min_block_us).is_err() {
                bail!(
                    "--min-block-us {} is too large: it would hide every blocking episode shorter than {} s (maximum {})",
                    args.min_block_us,
                    args.min_block_us / 1_000_000,
                    ranges::MIN_BLOCK_US.max
                );
            }
            options.frequency_hz = None;
            options.off_cpu = Some(OffCpuOptions {
                kind: match args.offcpu_kind {
                    OffCpuChoice::Voluntary => OffCpuKind::Voluntary,
                    OffCpuChoice::Involuntary => OffCpuKind::Involuntary,
                },
                min_block: Duration::from_micros(args.min_block_us),
                budget: sampling.offcpu_budget,
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

/// The summary: the window's figures, computed once by the catalogue from the profile written, as
/// `name: value` lines on stdout, and as one JSON object into `--summary-json` (`-`: stdout instead).
fn summary(window: &Window, profile: &Profile, args: &RecordArgs) -> anyhow::Result<()> {
    let input = Input::new(
        window,
        &[(crate::figures::coverage::UNKNOWN, profile)],
        Usage::now(),
        crate::figures::online_cpus(),
    );
    let figures = Running::default().window(&input);
    if let Some(path) = &args.summary_json {
        let json = serde_json::json!({
            "command": "record",
            "profile": profile.kind.name(),
            "output": args.output,
            "unsymbolized_top": offenders::json(&window.unsymbolized),
            "figures": figures.json(),
        });
        let text = format!("{json}\n");
        if path.as_os_str() == "-" {
            print!("{text}");
            return Ok(());
        }
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut out = format!(
        "{:<36}{} -> {}\n",
        "profile:",
        profile.kind.name(),
        args.output.display()
    );
    for line in summary_lines(&figures) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&format!(
        "{:<36}{}\n",
        "unsymbolized_top:",
        offenders::describe(&window.unsymbolized)
    ));
    print!("{out}");
    Ok(())
}
