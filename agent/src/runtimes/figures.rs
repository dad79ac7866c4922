//! How a runtime declares its own figures, beside its code: each `runtimes/<lang>/figures.rs` lists
//! them ([`RuntimeFigure`]) and the `/metrics` families they share, and `crate::figures` (the one
//! catalogue every report renders) takes them from the registry as it takes its own. A runtime's
//! figure reads its kernel counters (`sonde_abi::stat`) or its [`RuntimeCounts`], never anything of
//! another runtime.

use super::RuntimeCounts;

/// One series of a shared `/metrics` family: the family and this series' fixed labels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Series {
    pub family: &'static str,
    pub labels: &'static [(&'static str, &'static str)],
}

/// How a runtime figure is read from a window.
#[derive(Clone, Copy)]
pub(crate) enum Read {
    /// A kernel counter's increase in the window (`sonde_abi::stat`), also a series of
    /// `sonde_kernel_events`.
    Kernel(u32),
    /// The increase of one of the runtime's cumulative counts.
    SoFar(fn(&RuntimeCounts) -> u64),
    /// The window's increase of one kernel counter over another's (frames per walk), 0 when the
    /// second did not move.
    Mean { sum: u32, count: u32 },
}

/// One figure of a runtime.
#[derive(Clone, Copy)]
pub(crate) struct RuntimeFigure {
    /// Snake-case name (no unit: runtime figures are counts).
    pub key: &'static str,
    /// One sentence: `/metrics` help, and the README's table.
    pub help: &'static str,
    pub read: Read,
    /// The shared families it is a series of (its own family `sonde_<key>` when empty).
    pub series: &'static [Series],
}

impl RuntimeFigure {
    /// The increase of a cumulative count.
    pub(crate) const fn so_far(
        key: &'static str,
        help: &'static str,
        read: fn(&RuntimeCounts) -> u64,
    ) -> Self {
        Self {
            key,
            help,
            read: Read::SoFar(read),
            series: &[],
        }
    }

    /// A kernel counter.
    pub(crate) const fn kernel(key: &'static str, stat: u32, help: &'static str) -> Self {
        Self {
            key,
            help,
            read: Read::Kernel(stat),
            series: &[],
        }
    }

    /// Kernel counter `sum` per kernel counter `count` in the window.
    pub(crate) const fn mean(key: &'static str, help: &'static str, sum: u32, count: u32) -> Self {
        Self {
            key,
            help,
            read: Read::Mean { sum, count },
            series: &[],
        }
    }

    /// Published as these series of shared families.
    pub(crate) const fn at(mut self, series: &'static [Series]) -> Self {
        self.series = series;
        self
    }
}

/// One series of a shared family: `series!("sonde_python_processes", "support", "supported")`.
macro_rules! series {
    ($family:literal, $label:literal, $value:literal) => {
        &[$crate::runtimes::figures::Series {
            family: $family,
            labels: &[($label, $value)],
        }]
    };
}
pub(crate) use series;
