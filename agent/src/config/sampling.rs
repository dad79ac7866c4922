//! The sampling, unwinding and runtime settings `record` and `run` share: one set of flags
//! ([`SamplingArgs`]), the same keys at the top of `run`'s config file ([`SamplingFile`]), one
//! default and one range each (`ranges.rs`), resolved flag > file > default into [`Sampling`].

use std::str::FromStr as _;

use clap::ValueEnum as _;

use super::{ConfigError, invalid, ranges};
use crate::{bpf::options::LoadOptions, runtimes::Runtimes, unwind::UnwindMode};

/// Default `--offcpu-budget`, walks per CPU per second.
pub(crate) const DEFAULT_OFFCPU_BUDGET: u32 = 500;

/// Default on-CPU sampling frequency per CPU, Hz: not a divisor of common timer rates, so sampling does
/// not lock step with periodic work.
pub(crate) const DEFAULT_FREQUENCY_HZ: u64 = 99;

/// Default `--max-unwind-table-mib`: the tables of about 200 distinct binaries of a busy node.
pub(crate) const DEFAULT_UNWIND_TABLE_MIB: u32 = 64;

/// Entries per aggregation map (per slot): not a setting, the loader's sizing of one window.
const MAX_STACKS: u32 = 16384;

/// Sampling and unwinding flags of `record` and `run` (keys of `run`'s file of the same names).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SamplingArgs {
    /// On-CPU sampling frequency per CPU, Hz (`frequency_hz`) [default: 99].
    #[arg(long, value_name = "HZ")]
    pub frequency: Option<u64>,
    /// Off-CPU: stack walks per CPU per second; above it episodes are sampled, weighted so totals
    /// stay unbiased (0: every episode, exact counts) (`offcpu_budget`) [default: 500].
    #[arg(long, value_name = "WALKS")]
    pub offcpu_budget: Option<u64>,
    /// How user stacks are walked: `auto` uses unwind tables built from each binary's `.eh_frame`
    /// where they exist and frame pointers elsewhere; `fp` frame pointers only; `tables` tables only
    /// (`unwind`) [default: auto].
    #[arg(long, value_enum)]
    pub unwind: Option<UnwindMode>,
    /// Kernel memory for unwind tables, MiB (allocated at start; least recently used tables are
    /// evicted beyond it) (`max_unwind_table_mib`) [default: 64].
    #[arg(long, value_name = "MIB")]
    pub max_unwind_table_mib: Option<u64>,
    /// Runtimes whose frames are named beyond native symbols, comma-separated, or `all` or `none`:
    /// `python` (CPython 3.9 to 3.13: function, file and line in place of the interpreter's
    /// evaluation loop), `go` (names, lines and inlined calls from `.gopclntab`, stripped binaries
    /// too), `java` (HotSpot of OpenJDK 11 to 22: interpreted, JIT-compiled and inlined methods, no JVM
    /// flags), `node` (V8 of Node.js 18, 20 and 22: JavaScript functions, no Node flags)
    /// (`runtimes`) [default: all].
    #[arg(long)]
    pub runtimes: Option<Runtimes>,
}

/// The same settings as keys at the top of `run`'s config file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SamplingFile {
    pub(super) frequency_hz: Option<u64>,
    pub(super) offcpu_budget: Option<u64>,
    pub(super) unwind: Option<String>,
    pub(super) max_unwind_table_mib: Option<u64>,
    pub(super) runtimes: Option<String>,
}

/// The resolved settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampling {
    pub frequency_hz: u64,
    pub offcpu_budget: u32,
    pub unwind: UnwindMode,
    pub max_unwind_table_mib: u32,
    pub runtimes: Runtimes,
}

impl SamplingArgs {
    /// These flags over the file's keys over the defaults, each checked against its range.
    pub(super) fn resolve(&self, file: &SamplingFile) -> Result<Sampling, ConfigError> {
        let unwind = match (self.unwind, file.unwind.as_deref()) {
            (Some(mode), _) => mode,
            (None, Some(text)) => UnwindMode::from_str(text, true)
                .map_err(|_| invalid("unwind", text, "expected auto, fp or tables"))?,
            (None, None) => UnwindMode::default(),
        };
        let runtimes = match (self.runtimes, file.runtimes.as_deref()) {
            (Some(r), _) => r,
            (None, Some(text)) => {
                Runtimes::from_str(text).map_err(|e| invalid("runtimes", text, &e))?
            }
            (None, None) => Runtimes::default(),
        };
        Ok(Sampling {
            frequency_hz: ranges::FREQUENCY_HZ.check(
                self.frequency
                    .or(file.frequency_hz)
                    .unwrap_or(DEFAULT_FREQUENCY_HZ),
            )?,
            offcpu_budget: ranges::OFFCPU_BUDGET.check(
                self.offcpu_budget
                    .or(file.offcpu_budget)
                    .unwrap_or(DEFAULT_OFFCPU_BUDGET.into()),
            )? as u32,
            unwind,
            max_unwind_table_mib: ranges::MAX_UNWIND_TABLE_MIB.check(
                self.max_unwind_table_mib
                    .or(file.max_unwind_table_mib)
                    .unwrap_or(DEFAULT_UNWIND_TABLE_MIB.into()),
            )? as u32,
            runtimes,
        })
    }

    /// The flags alone (`record`, which has no config file).
    pub fn resolve_flags(&self) -> Result<Sampling, ConfigError> {
        self.resolve(&SamplingFile::default())
    }
}

impl Sampling {
    /// What the loader is asked for: on-CPU sampling at the frequency, off-CPU off, every process
    /// (the commands add off-CPU, a pid filter, a single window).
    pub(crate) fn load_options(&self) -> LoadOptions {
        LoadOptions {
            frequency_hz: Some(self.frequency_hz),
            off_cpu: None,
            pids: Vec::new(),
            max_stacks: MAX_STACKS,
            single_window: false,
            unwind: self.unwind,
            max_unwind_table_mib: self.max_unwind_table_mib,
            kernel_log: false,
            runtimes: self.runtimes,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::runtimes::Runtime;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        sampling: SamplingArgs,
    }

    fn args(argv: &[&str]) -> SamplingArgs {
        Cli::parse_from(std::iter::once("sonde").chain(argv.iter().copied())).sampling
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_the_defaults() {
        let file: SamplingFile =
            toml::from_str("frequency_hz = 49\nunwind = \"fp\"\nruntimes = \"go\"\n").unwrap();
        let s = args(&[]).resolve(&file).unwrap();
        assert_eq!((s.frequency_hz, s.unwind), (49, UnwindMode::Fp));
        assert!(!s.runtimes.has(Runtime::Python));
        let s = args(&["--frequency", "199", "--runtimes", "python,go"])
            .resolve(&file)
            .unwrap();
        assert_eq!(s.frequency_hz, 199);
        assert!(s.runtimes.has(Runtime::Python) && s.runtimes.has(Runtime::Go));
        let d = args(&[]).resolve_flags().unwrap();
        assert_eq!(d.frequency_hz, DEFAULT_FREQUENCY_HZ);
        assert_eq!(d.offcpu_budget, DEFAULT_OFFCPU_BUDGET);
        assert_eq!(d.max_unwind_table_mib, DEFAULT_UNWIND_TABLE_MIB);
    }

    #[test]
    fn out_of_range_and_unknown_values_name_the_key() {
        let err = args(&["--frequency", "0"])
            .resolve_flags()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("frequency_hz (--frequency)") && err.contains("1 and 1000"),
            "{err}"
        );
        let file: SamplingFile = toml::from_str("unwind = \"dwarf\"\n").unwrap();
        let err = args(&[]).resolve(&file).unwrap_err().to_string();
        assert!(err.contains("`unwind`"), "{err}");
    }
}
