//! What the loader is asked to load and how: the value the commands derive from their settings.

use std::time::Duration;

use sonde_abi::OffCpuKind;

use super::unwind_maps::UnwindMode;
use crate::{
    platform::kernel::Programs,
    runtimes::{registry, seam::KernelSide},
};

/// Off-CPU tracking settings.
#[derive(Clone, Copy, Debug)]
pub struct OffCpuOptions {
    /// Which episodes count.
    pub kind: OffCpuKind,
    /// Shorter episodes are counted as short and dropped.
    pub min_block: Duration,
    /// Stack walks per CPU per second (0: every episode is tracked).
    pub budget: u32,
}

/// What to load and how, derived from the settings (`config::Sampling::load_options`, which owns
/// every default).
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// On-CPU sampling frequency per CPU; None disables on-CPU sampling.
    pub frequency_hz: Option<u64>,
    /// Off-CPU tracking; None disables it.
    pub off_cpu: Option<OffCpuOptions>,
    /// Only these processes; all when empty.
    pub pids: Vec<u32>,
    /// Entries per aggregation map (per slot).
    pub max_stacks: u32,
    /// Only one window will be drained (`sonde record`): the other slots are never written (with
    /// `pids`, slot 0 only while the named processes' tables load), so they get one entry each
    /// instead of full size (less kernel memory, faster start).
    pub single_window: bool,
    /// How user stacks are walked.
    pub unwind: UnwindMode,
    /// Kernel memory for unwind rows, MiB (allocated in full at load).
    pub max_unwind_table_mib: u32,
    /// Have the programs log their failed invocations (see [`super::kernel_log`]) even when the log
    /// filter does not enable `sonde::bpf::kernel` at debug level (the lines still go through it).
    pub kernel_log: bool,
    /// The runtimes that are on (`--runtimes`): Python frames are walked when `python` is.
    pub runtimes: crate::runtimes::Runtimes,
}

impl LoadOptions {
    /// Whether the kernel side of a runtime is on: the runtime is, and the walk it needs runs.
    pub(super) fn runs(&self, side: &KernelSide) -> bool {
        self.runtimes.has(side.runtime) && !(side.needs_tables && self.unwind == UnwindMode::Fp)
    }

    /// These options for `programs`: a runtime whose kernel side the legacy object lacks is off
    /// there, said once.
    pub(super) fn for_programs(&self, programs: Programs) -> Self {
        let mut options = self.clone();
        if programs == Programs::Legacy {
            for side in registry::kernel_sides().filter(|s| !s.in_legacy) {
                if options.runtimes.has(side.runtime) {
                    tracing::info!(
                        runtime = side.runtime.name(),
                        "this kernel runs the legacy programs (Linux 5.10 to 6.0), which walk no {} frames: they stay native",
                        side.runtime.name()
                    );
                    options.runtimes = options.runtimes.with(side.runtime, false);
                }
            }
        }
        options
    }

    /// The runtimes' kernel sides, each with whether it is on.
    pub(super) fn kernel_sides(&self) -> impl Iterator<Item = (&'static KernelSide, bool)> + '_ {
        registry::kernel_sides().map(|side| (side, self.runs(side)))
    }
}
