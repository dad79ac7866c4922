//! CRuby's figures: what its capture found, what its namer named and what its kernel walker
//! counted, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::{RuntimeFigure as F, series};

/// The help of the shared `/metrics` families these figures are series of.
pub(crate) const FAMILIES: &[(&str, &str)] = &[(
    "sonde_ruby_processes",
    "Processes found running CRuby, by whether sonde walks their Ruby frames (supported) or shows native frames only (unsupported: a version outside 3.0 to 3.4, or a build without a thread-local execution context).",
)];

/// The figures, in report order: the window's, then one per kernel counter of this runtime.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        "ruby_processes",
        "Processes running a CRuby VM sonde walks.",
        |c| c.processes.found,
    )
    .at(series!("sonde_ruby_processes", "support", "supported")),
    F::so_far(
        "ruby_unsupported",
        "Processes running a CRuby VM sonde cannot walk (native frames only).",
        |c| c.processes.unsupported,
    )
    .at(series!("sonde_ruby_processes", "support", "unsupported")),
    F::so_far(
        "ruby_stacks",
        "Stacks (weighted) with at least one Ruby frame.",
        |c| c.frames.stacks,
    ),
    F::so_far(
        "ruby_frames_emitted",
        "Ruby frames exported (weighted).",
        |c| c.frames.frames,
    ),
    F::so_far(
        "ruby_frames_unreadable",
        "Ruby frames whose instruction sequence could not be read (weighted).",
        |c| c.frames.unreadable,
    ),
    F::so_far(
        "ruby_frames_dropped",
        "Ruby frames dropped: their process has no VM known to sonde (weighted).",
        |c| c.frames.dropped,
    ),
    F::mean(
        "ruby_frames_per_stack",
        "Ruby frames per Ruby walk in the last window.",
        stat::RB_FRAMES,
        stat::RB_WALKS,
    ),
    F::kernel(
        "ruby_walks",
        stat::RB_WALKS,
        "Stacks of CRuby processes whose Ruby frames were walked.",
    ),
    F::kernel(
        "ruby_frames",
        stat::RB_FRAMES,
        "Ruby frames stored by those walks.",
    ),
    F::kernel(
        "ruby_no_context",
        stat::RB_NO_CONTEXT,
        "Ruby walks of threads with no execution context (not a Ruby thread; not a failure).",
    ),
    F::kernel(
        "ruby_read_fault",
        stat::RB_READ_FAULT,
        "Ruby walks that ended early: VM memory was unreadable.",
    ),
    F::kernel(
        "ruby_truncated",
        stat::RB_TRUNCATED,
        "Ruby walks cut because the stack was full.",
    ),
];
