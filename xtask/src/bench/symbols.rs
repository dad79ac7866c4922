//! `## Symbols` of `cargo xtask bench`: how many frames sonde names for C workloads built without
//! frame pointers, unstripped and stripped, with and without a (local) debuginfod server, and what a
//! cold debuginfod cache (first fetch) and a warm one cost the agent in CPU, memory and disk. Each
//! workload gets its own `sonde record --pid` per row, in interleaved rounds.

mod report;
mod server;
mod workloads;

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail, ensure};

use self::{
    server::Debuginfod,
    workloads::{OwnFrames, Workload},
};
use crate::bench::{Usage, has_exited, sonde_summary, wait_usage};

/// Settings of the section (from `cargo xtask bench` flags).
pub(crate) struct Options {
    /// Window of each recording.
    pub(crate) window: Duration,
    /// Rounds over all rows; per-row numbers are medians over them.
    pub(crate) rounds: usize,
}

/// Time the workload runs before sonde starts, so its first samples are not its start-up.
const WARM_UP: Duration = Duration::from_millis(500);

/// Time beyond the window sonde gets to attach, symbolize and write before it is interrupted.
const EXIT_GRACE: Duration = Duration::from_secs(120);

/// How a workload is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Row {
    Unstripped,
    UnstrippedDebuginfod,
    Stripped,
    Cold,
    Warm,
}

impl Row {
    const ALL: [Row; 5] = [
        Row::Unstripped,
        Row::UnstrippedDebuginfod,
        Row::Stripped,
        Row::Cold,
        Row::Warm,
    ];

    /// Rows run back to back within a round: the warm cache is the cold row's, so it follows it.
    const UNITS: [&'static [Row]; 4] = [
        &[Row::Unstripped],
        &[Row::UnstrippedDebuginfod],
        &[Row::Stripped],
        &[Row::Cold, Row::Warm],
    ];

    fn name(self) -> &'static str {
        match self {
            Row::Unstripped => "unstripped",
            Row::UnstrippedDebuginfod => "unstripped + debuginfod",
            Row::Stripped => "stripped, no debuginfod",
            Row::Cold => "stripped + debuginfod, cold cache",
            Row::Warm => "stripped + debuginfod, warm cache",
        }
    }

    fn file_stem(self) -> &'static str {
        match self {
            Row::Unstripped => "unstripped",
            Row::UnstrippedDebuginfod => "unstripped-debuginfod",
            Row::Stripped => "stripped",
            Row::Cold => "cold",
            Row::Warm => "warm",
        }
    }

    fn stripped(self) -> bool {
        matches!(self, Row::Stripped | Row::Cold | Row::Warm)
    }

    fn debuginfod(self) -> bool {
        matches!(self, Row::UnstrippedDebuginfod | Row::Cold | Row::Warm)
    }

    /// Whether the workload's debug info is reachable, which is when the 95% target applies.
    fn reachable(self) -> bool {
        self != Row::Stripped
    }
}

/// One recording.
struct Run {
    /// sonde's CPU (wait4 user + system) and peak RSS; its BPF programs' time is not included, and it
    /// is the same whatever the symbols.
    usage: Usage,
    /// sonde's printed summary: key (with its colon), value.
    summary: Vec<(String, String)>,
    own: OwnFrames,
    /// The debuginfod cache after the recording.
    cache: CacheUse,
}

impl Run {
    fn text(&self, key: &str) -> Option<&str> {
        self.summary
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A value of sonde's summary, as a number (a trailing `%` dropped).
    fn value(&self, key: &str) -> Option<f64> {
        self.text(key)?.trim_end_matches('%').parse().ok()
    }
}

/// Every recording of one workload in one row.
#[derive(Default)]
struct Runs {
    runs: Vec<Run>,
    /// Recordings that failed, with why: reported, and the other rows still run.
    failures: Vec<String>,
    /// Things the report must mention (a workload that exited during its window).
    notes: Vec<String>,
}

/// Files and bytes under a cache directory.
#[derive(Clone, Copy, Default)]
struct CacheUse {
    files: u64,
    /// Sum of file sizes.
    bytes: u64,
    /// Blocks allocated to them (what `du` reports).
    allocated: u64,
}

impl CacheUse {
    fn measure(dir: &Path) -> Self {
        let mut total = Self::default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return total;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                let sub = Self::measure(&entry.path());
                total.files += sub.files;
                total.bytes += sub.bytes;
                total.allocated += sub.allocated;
            } else {
                total.files += 1;
                total.bytes += meta.len();
                total.allocated += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
            }
        }
        total
    }
}

/// Runs the section and prints it; files are kept in `dir/symbols`.
pub(crate) fn run(sonde: &Path, dir: &Path, options: &Options) -> anyhow::Result<()> {
    ensure!(options.rounds > 0, "--symbols-rounds must be at least 1");
    let dir = dir.join("symbols");
    let served = dir.join("debuginfod-files");
    // Stale debug files of an earlier build would be indexed beside the new ones.
    let _ = std::fs::remove_dir_all(&served);
    std::fs::create_dir_all(&dir)?;
    let workloads = workloads::prepare(&dir, &served)?;
    let ids: Vec<&str> = workloads.iter().map(|w| w.build_id.as_str()).collect();
    let server = Debuginfod::start(&dir, &served, &ids)?;
    let mut all: Vec<Vec<Runs>> = workloads
        .iter()
        .map(|_| Row::ALL.iter().map(|_| Runs::default()).collect())
        .collect();
    for round in 0..options.rounds {
        // Odd rounds go backwards, so no workload or row is always first (or last) of a round.
        let mut order: Vec<(usize, &[Row])> = (0..workloads.len())
            .flat_map(|w| Row::UNITS.iter().map(move |&unit| (w, unit)))
            .collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for (w, unit) in order {
            let mut cold_failed = false;
            for &row in unit {
                let runs = &mut all[w][row as usize];
                if cold_failed {
                    runs.failures.push(format!(
                        "round {round}: skipped, the cold row before it failed"
                    ));
                    continue;
                }
                let workload = &workloads[w];
                eprintln!(
                    "symbols bench: round {round}, {}, {}",
                    workload.name,
                    row.name()
                );
                match record(sonde, workload, row, round, &dir, &server, options.window) {
                    Ok((run, note)) => {
                        runs.runs.push(run);
                        runs.notes.extend(note);
                    }
                    Err(e) => {
                        cold_failed = row == Row::Cold;
                        runs.failures.push(format!("round {round}: {e:#}"));
                    }
                }
            }
        }
    }
    drop(server);
    report::print(&workloads, &all, options, &dir);
    Ok(())
}

/// Records one workload in one row; returns the recording and, if its workload exited early, a note.
fn record(
    sonde: &Path,
    workload: &Workload,
    row: Row,
    round: usize,
    dir: &Path,
    server: &Debuginfod,
    window: Duration,
) -> anyhow::Result<(Run, Option<String>)> {
    let stem = dir.join(format!("{}-{}-r{round}", workload.name, row.file_stem()));
    let path = |ext: &str| PathBuf::from(format!("{}.{ext}", stem.display()));
    // The warm row reuses its round's cold cache; every other row starts from an empty one, also
    // those without debuginfod, so nothing fetched earlier can name their frames.
    let cache_row = if row == Row::Warm { Row::Cold } else { row };
    let cache = dir.join(format!(
        "cache/{}-{}-r{round}",
        workload.name,
        cache_row.file_stem()
    ));
    if row != Row::Warm {
        let _ = std::fs::remove_dir_all(&cache);
    }
    std::fs::create_dir_all(&cache)?;
    for ext in ["folded", "pb.gz", "summary"] {
        let _ = std::fs::remove_file(path(ext));
    }
    let mut running = workload.start(row.stripped())?;
    std::thread::sleep(WARM_UP);
    let child = Command::new(sonde)
        .args([
            "record",
            "--summary-json",
            "-",
            "--duration",
            &window.as_secs().to_string(),
        ])
        .args(["--pid", &running.pid().to_string(), "--output"])
        .arg(path("pb.gz"))
        .arg("--folded")
        .arg(path("folded"))
        .arg("--debuginfod-urls")
        .arg(if row.debuginfod() {
            server.url.as_str()
        } else {
            ""
        })
        .arg("--debuginfod-cache-dir")
        .arg(&cache)
        // The flag decides; an operator's server list must not leak into the rows without one.
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::piped())
        .stderr(File::create(path("stderr"))?)
        .spawn()
        .context("starting sonde record")?;
    // sonde stops itself after the window; symbolization happens before it exits, workload alive.
    let usage = wait_bounded(child, window + EXIT_GRACE)?;
    let note = running.exited().then(|| {
        format!(
            "{}, {}, round {round}: the workload exited before sonde did",
            workload.name,
            row.name()
        )
    });
    drop(running);
    // Kept for reading an odd row afterwards (which tables it built, what it fetched).
    std::fs::write(path("summary"), &usage.stdout)?;
    if !usage.status.success() {
        bail!(
            "sonde record failed ({}); see {}",
            usage.status,
            path("stderr").display()
        );
    }
    let folded = std::fs::read_to_string(path("folded"))
        .with_context(|| format!("reading {}", path("folded").display()))?;
    let run = Run {
        summary: sonde_summary(&usage.stdout),
        own: workload.own_frames(&folded),
        cache: CacheUse::measure(&cache),
        usage,
    };
    Ok((run, note))
}

/// Waits for sonde to exit on its own, interrupting it (SIGINT, then SIGKILL) past `limit` so a hung
/// recording cannot hold the bench, and the machine's BPF lock, forever.
fn wait_bounded(child: Child, limit: Duration) -> anyhow::Result<Usage> {
    let pid = child.id();
    let started = Instant::now();
    let mut interrupted = false;
    // Its stdout (a summary of a few KiB) fits the pipe, so it cannot block on it meanwhile.
    while !has_exited(pid) {
        let elapsed = started.elapsed();
        if elapsed > limit + Duration::from_secs(30) {
            // SAFETY: signalling our own, not yet reaped, child.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        } else if elapsed > limit && !interrupted {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
            interrupted = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let usage = wait_usage(child)?;
    if interrupted {
        bail!(
            "sonde record did not exit within {} s of its start; interrupted",
            limit.as_secs()
        );
    }
    Ok(usage)
}
