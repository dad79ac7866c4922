//! The three off-CPU profilers of the context-switch section and one system-wide recording with each:
//! the sleeper (when given) starts first, then the profiler, then the workload; the profiler is stopped
//! before the sleeper is killed (both profilers symbolize at exit and need it alive), and the sleeper's
//! split is read from the profiler's own output.

use std::{
    os::unix::process::ExitStatusExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::split::{self, Split};
use crate::bench::{Measured, Profiler, measure, sonde_summary};

/// bpftrace's equivalent of sonde's default off-CPU profile: voluntary blocking only (`prev_state`
/// has TASK_INTERRUPTIBLE or TASK_UNINTERRUPTIBLE, bits 0 and 1), both stacks taken at switch-out,
/// the time summed at switch-in. The key starts with the blocked thread's name (`next_comm`: at
/// switch-in the current task is still the one leaving) so the sleeper's entries can be told apart.
/// The per-thread scratch maps are cleared at exit, so only `@off` is printed.
const BPFTRACE: &str = "tracepoint:sched:sched_switch { \
  if (args->prev_state & 3) { @start[args->prev_pid] = nsecs; @ks[args->prev_pid] = kstack; @us[args->prev_pid] = ustack; } \
  $s = @start[args->next_pid]; \
  if ($s) { @off[args->next_comm, @ks[args->next_pid], @us[args->next_pid]] = sum(nsecs - $s); \
            delete(@start[args->next_pid]); delete(@ks[args->next_pid]); delete(@us[args->next_pid]); } } \
  END { clear(@start); clear(@ks); clear(@us); }";

/// Which profiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    SondeDefault,
    SondeUnlimited,
    Bpftrace,
}

impl Kind {
    /// Every profiler, in the order of the first round.
    pub(super) const ALL: [Kind; 3] = [Kind::SondeDefault, Kind::SondeUnlimited, Kind::Bpftrace];

    /// The row label.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::SondeDefault => "sonde record --profile offcpu (default budget)",
            Kind::SondeUnlimited => "sonde record --profile offcpu --offcpu-budget 0",
            Kind::Bpftrace => "bpftrace sched_switch kstack+ustack",
        }
    }

    /// The start of its files' names.
    pub(super) fn file_stem(self) -> &'static str {
        match self {
            Kind::SondeDefault => "sonde-default",
            Kind::SondeUnlimited => "sonde-unlimited",
            Kind::Bpftrace => "bpftrace",
        }
    }

    /// Whether this is one of sonde's rows.
    pub(super) fn is_sonde(self) -> bool {
        matches!(self, Kind::SondeDefault | Kind::SondeUnlimited)
    }

    /// The profiler's command line; files are named `stem.EXT`.
    fn profiler(self, sonde: &Path, stem: &dyn Fn(&str) -> PathBuf) -> Profiler {
        let s = |x: &str| x.to_owned();
        let cmd = if self.is_sonde() {
            let mut cmd = vec![
                sonde.display().to_string(),
                s("record"),
                s("--summary-json"),
                s("-"),
                s("--profile"),
                s("offcpu"),
                s("--duration"),
                s("86400"),
            ];
            if self == Kind::SondeUnlimited {
                cmd.extend([s("--offcpu-budget"), s("0")]);
            }
            cmd.extend([
                s("--output"),
                stem("pb.gz").display().to_string(),
                s("--folded"),
                stem("folded").display().to_string(),
            ]);
            cmd
        } else {
            vec![s("bpftrace"), s("-e"), s(BPFTRACE)]
        };
        Profiler {
            name: self.name(),
            cmd,
            stderr: Some(stem("stderr")),
        }
    }
}

/// One recording of one profiler.
pub(super) struct Recording {
    pub(super) measured: Measured,
    /// The sleeper's split, or why it could not be read from the profiler's output.
    pub(super) split: Result<Split, String>,
    /// sonde's printed summary (empty for bpftrace).
    pub(super) summary: Vec<(String, String)>,
}

impl Recording {
    /// A value of sonde's summary, as a number.
    pub(super) fn summary_value(&self, key: &str) -> Option<f64> {
        let (_, v) = self.summary.iter().find(|(k, _)| k == key)?;
        v.trim_end_matches('%').parse().ok()
    }
}

/// Records `workload` with `kind`, beside the sleeper when one is given; files are named `stem.EXT`.
pub(super) fn record(
    kind: Kind,
    sonde: &Path,
    sleeper: Option<&Path>,
    workload: &mut Command,
    stem: &Path,
) -> anyhow::Result<Recording> {
    let path = |ext: &str| PathBuf::from(format!("{}.{ext}", stem.display()));
    // A stale folded file of an earlier bench would be read as this run's.
    let _ = std::fs::remove_file(path("folded"));
    let mut sleeper = sleeper.map(Sleeper::start).transpose()?;
    let measured = measure(&kind.profiler(sonde, &path), workload)?;
    let sleeper_ended = sleeper.as_mut().is_some_and(Sleeper::ended);
    drop(sleeper);
    let status = measured.usage.status;
    // bpftrace may re-raise the SIGINT that stopped it once its maps are printed: that is success.
    if !status.success() && status.signal() != Some(libc::SIGINT) {
        bail!(
            "{} failed ({status}); see {}",
            kind.name(),
            path("stderr").display()
        );
    }
    let mut split = if kind.is_sonde() {
        std::fs::read_to_string(path("folded"))
            .map_err(|e| format!("reading {}: {e}", path("folded").display()))
            .and_then(|text| split::from_folded(&text))
    } else {
        split::from_bpftrace(&measured.usage.stdout)
            .map_err(|e| format!("{e} (stderr: {})", path("stderr").display()))
    };
    if sleeper_ended {
        split = Err("offcpu_sleep exited before the profiler stopped".into());
    }
    let summary = if kind.is_sonde() {
        sonde_summary(&measured.usage.stdout)
    } else {
        Vec::new()
    };
    Ok(Recording {
        measured,
        split,
        summary,
    })
}

/// The running sleeper; killed and reaped when dropped, so no error path leaves it behind.
pub(super) struct Sleeper(Child);

impl Sleeper {
    /// Starts `offcpu_sleep` for longer than any recording (it is killed instead).
    pub(super) fn start(program: &Path) -> anyhow::Result<Self> {
        Command::new(program)
            .arg("86400")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map(Self)
            .with_context(|| format!("starting {}", program.display()))
    }

    /// Whether it already exited (its split would then miss part of the window).
    fn ended(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
