//! CPython's figures: what its capture found, what its namer named and what its kernel walker
//! counted, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::{RuntimeFigure as F, series};

/// The help of the shared `/metrics` families these figures are series of.
pub(crate) const FAMILIES: &[(&str, &str)] = &[(
    "sonde_python_processes",
    "Processes found running CPython, by whether sonde walks their Python frames (supported) or shows native frames only (unsupported: a version outside 3.9 to 3.13).",
)];

/// The figures, in report order: the window's, then one per kernel counter of this runtime.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        "python_processes",
        "Processes running a CPython interpreter sonde walks.",
        |c| c.processes.found,
    )
    .at(series!("sonde_python_processes", "support", "supported")),
    F::so_far(
        "python_unsupported",
        "Processes running a CPython sonde cannot walk (native frames only).",
        |c| c.processes.unsupported,
    )
    .at(series!("sonde_python_processes", "support", "unsupported")),
    F::so_far(
        "python_stacks",
        "Stacks (weighted) with at least one Python frame.",
        |c| c.frames.stacks,
    ),
    F::so_far(
        "python_frames_emitted",
        "Python frames exported (weighted).",
        |c| c.frames.frames,
    ),
    F::so_far(
        "python_frames_unreadable",
        "Python frames whose code object could not be read (weighted).",
        |c| c.frames.unreadable,
    ),
    F::so_far(
        "python_frames_dropped",
        "Python frames dropped: their process has no interpreter known to sonde (weighted).",
        |c| c.frames.dropped,
    ),
    F::mean(
        "python_frames_per_stack",
        "Python frames per Python walk in the last window.",
        stat::PY_FRAMES,
        stat::PY_WALKS,
    ),
    F::kernel(
        "python_walks",
        stat::PY_WALKS,
        "Stacks of CPython processes whose Python frames were walked.",
    ),
    F::kernel(
        "python_frames",
        stat::PY_FRAMES,
        "Python frames stored by those walks.",
    ),
    F::kernel(
        "python_idle",
        stat::PY_IDLE,
        "Python walks of threads running no Python code (not a failure).",
    ),
    F::kernel(
        "python_no_thread",
        stat::PY_NO_THREAD,
        "Python walks that failed: the thread's state was not found.",
    ),
    F::kernel(
        "python_read_fault",
        stat::PY_READ_FAULT,
        "Python walks that failed: interpreter memory was unreadable.",
    ),
    F::kernel(
        "python_truncated",
        stat::PY_TRUNCATED,
        "Python walks cut because the stack was full.",
    ),
    F::kernel(
        "python_processes_by_binary",
        stat::PY_BY_BINARY,
        "Processes given their interpreter by the kernel as they mapped a known one (walked from their first sample).",
    ),
];
