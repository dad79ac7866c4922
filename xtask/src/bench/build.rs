//! `## Short-lived processes` of `cargo xtask bench`: a build loop (Debian's gcc compiling 40 small C
//! files two at a time, again and again: `gcc`, `cc1` and `as` live 10-50 ms each) recorded host-wide
//! by `sonde record` and by `perf record -a --call-graph dwarf`, both at 99 Hz over the same span, in
//! interleaved rounds; tables show medians over rounds. Per profiler: samples of the three commands,
//! the share reaching a thread root (one rule for both, that of the unwinding section: a user frame
//! named as a glibc thread entry), the profiler's CPU per second of the span (perf's `perf script`
//! unwinding counted apart) and BPF time per sampling run; for sonde, how many walks were of processes
//! it had not captured (walked with the mappings the kernel recorded) and their share reaching a root.

mod restart;

use std::{
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, ensure};

use super::{
    BpfUsage, HostProfiler as Kind, bpf_usage, cpu_of, median, sonde_summary,
    unwind::stacks::{self, Share},
    wait_usage,
};

/// The commands of the build, in table order.
const COMMANDS: [&str; 3] = ["gcc", "cc1", "as"];
/// Seconds the loop runs before a profiler starts, and before its span is measured.
const WARM_UP: Duration = Duration::from_secs(1);
const LOAD: Duration = Duration::from_millis(1500);

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) type Options = super::Rounds;

struct Run {
    kind: Kind,
    shares: Vec<Share>,
    cpu_per_s: f64,
    /// perf script's CPU per second of the span (perf unwinds after recording).
    post_cpu_per_s: Option<f64>,
    bpf_ns_per_sample: Option<f64>,
    /// sonde: walks of processes not captured yet, and the share of them reaching a root.
    new_walks: Option<(f64, f64)>,
    /// sonde: walks and the share reaching a root, per process-age bucket of its summary.
    by_age: Vec<(f64, f64)>,
}

/// The process-age buckets of sonde's summary (`walk_root_ratio_by_age[<bucket>]`), youngest first.
const AGE_BUCKETS: [&str; 5] = ["0-1ms", "1-10ms", "10-100ms", "100ms-1s", "1s+"];

/// Runs the section and prints it; files are kept in `dir/build`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.seconds >= 3, "--build-seconds must be at least 3");
    ensure!(options.rounds > 0, "--build-rounds must be at least 1");
    let dir = dir.join("build");
    std::fs::create_dir_all(&dir)?;
    let sources = dir.join("sources");
    let runs = super::interleaved(
        "build",
        options.rounds,
        &Kind::ALL,
        Kind::name,
        |round, kind| {
            let stem = dir.join(format!("{}-r{round}", kind.stem()));
            measure(kind, sonde, &sources, &stem, options.seconds)
        },
    )?;
    print(&runs, options);
    restart::print(&restart::measure(sonde, &sources, &dir)?);
    Ok(())
}

/// The build loop, in its own process group (killed as a group).
struct Loop(Child);

impl Loop {
    fn start(sources: &Path) -> anyhow::Result<Self> {
        // The same build as the test `unwind_short_lived`: tests/workloads/build_loop.sh.
        let child = Command::new("sh")
            .arg(crate::util::root().join("tests/workloads/build_loop.sh"))
            .arg(sources)
            .process_group(0)
            .spawn()
            .context("starting the build loop")?;
        Ok(Self(child))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // SAFETY: signals the process group this bench created.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn measure(
    kind: Kind,
    sonde: &Path,
    sources: &Path,
    stem: &Path,
    seconds: u64,
) -> anyhow::Result<Run> {
    let path = |ext: &str| stem.with_extension(ext);
    let build = Loop::start(sources)?;
    std::thread::sleep(WARM_UP);
    let mut cmd = kind.command(sonde, stem, seconds);
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(path("stderr"))?)
        .spawn()
        .with_context(|| format!("starting {}", kind.name()))?;
    let pid = child.id();
    // The span measured: from after the profiler's start-up to just before it stops by itself.
    std::thread::sleep(LOAD);
    let (cpu_before, bpf_before) = (cpu_of(pid), bpf_usage(pid));
    let span = Duration::from_secs(seconds).saturating_sub(LOAD + Duration::from_millis(500));
    std::thread::sleep(span);
    let (cpu_after, bpf_after) = (cpu_of(pid), bpf_usage(pid));
    let usage = wait_usage(child)?;
    std::fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    drop(build);
    ensure!(
        usage.status.success(),
        "{} failed ({}); see {}",
        kind.name(),
        usage.status,
        path("stderr").display()
    );
    let cpu = cpu_after
        .zip(cpu_before)
        .map(|(a, b)| a.saturating_sub(b))
        .unwrap_or_default();
    let bpf = BpfUsage::between(bpf_before, bpf_after);
    let slot = |comm: &str| COMMANDS.iter().position(|c| *c == comm);
    let mut by_age = Vec::new();
    let (shares, post_cpu, new_walks) = match kind {
        Kind::Sonde => {
            let folded = std::fs::read_to_string(path("folded"))
                .with_context(|| format!("reading {}", path("folded").display()))?;
            let summary = sonde_summary(&usage.stdout);
            let field = |key: &str| super::summary_number(&summary, key);
            let new = field("vma_walks").zip(field("walk_root_ratio_new_processes"));
            by_age = AGE_BUCKETS
                .iter()
                .filter_map(|age| {
                    field(&format!(
                        "walks_age_{}",
                        age.replace('-', "_").replace("1s+", "1s_up")
                    ))
                    .zip(field(&format!("walk_root_ratio_by_age[{age}]")))
                })
                .collect();
            (
                stacks::from_folded(&folded, COMMANDS.len(), slot),
                None,
                new,
            )
        }
        Kind::PerfDwarf => {
            let script = Command::new("perf")
                .args(["script", "--no-inline", "-F", "comm,ip,sym,dso", "-i"])
                .arg(path("data"))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .context("starting perf script")?;
            let script = wait_usage(script)?;
            ensure!(script.status.success(), "perf script failed");
            (
                stacks::from_perf_script_by(&script.stdout, COMMANDS.len(), slot),
                Some(script.cpu.as_secs_f64() / seconds as f64),
                None,
            )
        }
    };
    Ok(Run {
        kind,
        shares,
        cpu_per_s: cpu.as_secs_f64() / span.as_secs_f64(),
        post_cpu_per_s: post_cpu,
        bpf_ns_per_sample: (bpf.sampling_runs > 0)
            .then(|| bpf.sampling_ns as f64 / bpf.sampling_runs as f64),
        new_walks,
        by_age,
    })
}

fn print(runs: &[Run], options: &Options) {
    println!("\n## Short-lived processes (build loop)\n");
    println!(
        "Debian's gcc compiling 40 small C files two at a time, again and again; every profiler \
         records the whole host at 99 Hz for {} s, {} interleaved rounds (medians). Complete: a user \
         frame is a glibc thread entry; in brackets, of the samples with a user stack (not taken in \
         `do_exit` or `load_elf_binary`, where the process has none: same rule for both).\n",
        options.seconds, options.rounds
    );
    println!(
        "| profiler | gcc complete | cc1 complete | as complete | samples | no user stack | CPU s/s | after (s/s) | BPF ns/sample | uncaptured walks (root) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for kind in Kind::ALL {
        let mine: Vec<&Run> = runs.iter().filter(|r| r.kind == kind).collect();
        let share = |i: usize| {
            let of = |f: fn(Share) -> Option<f64>| {
                median(
                    mine.iter()
                        .filter_map(|r| r.shares.get(i).copied().and_then(f))
                        .collect(),
                )
            };
            match (of(Share::percent), of(Share::percent_of_live)) {
                (Some(all), Some(live)) => format!("{all:.1}% ({live:.1}%)"),
                _ => "-".to_owned(),
            }
        };
        let total = |f: fn(&Share) -> u64| {
            median(
                mine.iter()
                    .map(|r| r.shares.iter().map(f).sum::<u64>() as f64)
                    .collect(),
            )
            .map_or("-".to_owned(), |s| format!("{s:.0}"))
        };
        let m = |f: &dyn Fn(&Run) -> Option<f64>, precision: usize| {
            median(mine.iter().filter_map(|r| f(r)).collect())
                .map_or("-".to_owned(), |v| format!("{v:.precision$}"))
        };
        let new = median(
            mine.iter()
                .filter_map(|r| r.new_walks.map(|w| w.0))
                .collect(),
        );
        let new_root = median(
            mine.iter()
                .filter_map(|r| r.new_walks.map(|w| w.1))
                .collect(),
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            share(0),
            share(1),
            share(2),
            total(|s| s.samples),
            total(|s| s.stackless),
            m(&|r| Some(r.cpu_per_s), 4),
            m(&|r| r.post_cpu_per_s, 3),
            m(&|r| r.bpf_ns_per_sample, 0),
            match (new, new_root) {
                (Some(n), Some(r)) => format!("{n:.0} ({r:.1}%)"),
                _ => "-".to_owned(),
            },
        );
    }
    println!(
        "\nperf unwinds after recording (`perf script`, the \"after\" column); sonde unwinds in the \
         kernel, so its BPF time per sample holds the walk.\n"
    );
    // How soon after a process starts its samples are complete: sonde's walks by process age (since
    // fork; a build tool execs within microseconds of it), all processes of the host.
    println!("| sonde, process age | walks | reaching a root |");
    println!("|---|---|---|");
    let sonde: Vec<&Run> = runs.iter().filter(|r| r.kind == Kind::Sonde).collect();
    for (i, age) in AGE_BUCKETS.iter().enumerate() {
        let of = |f: fn(&(f64, f64)) -> f64| {
            median(
                sonde
                    .iter()
                    .filter_map(|r| r.by_age.get(i).map(f))
                    .collect(),
            )
        };
        println!(
            "| {age} | {} | {} |",
            of(|b| b.0).map_or("-".to_owned(), |v| format!("{v:.0}")),
            of(|b| b.1).map_or("-".to_owned(), |v| format!("{v:.1}%")),
        );
    }
    println!(
        "\nWalks of processes exiting or inside execve (no user stack) are left out of the buckets."
    );
}
