//! PHP's figures: what its capture found, what its namer named and what its kernel walker
//! counted, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::{RuntimeFigure as F, series};

/// The help of the shared `/metrics` families these figures are series of.
pub(crate) const FAMILIES: &[(&str, &str)] = &[(
    "sonde_php_processes",
    "Processes found running PHP, by whether sonde walks their PHP frames (supported) or shows native frames only (unsupported: a version outside 7.4 to 8.5, or a thread-safe build).",
)];

/// The figures, in report order: the window's, then one per kernel counter of this runtime.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        "php_processes",
        "Processes running a PHP executor sonde walks.",
        |c| c.processes.found,
    )
    .at(series!("sonde_php_processes", "support", "supported")),
    F::so_far(
        "php_unsupported",
        "Processes running a PHP executor sonde cannot walk (native frames only).",
        |c| c.processes.unsupported,
    )
    .at(series!("sonde_php_processes", "support", "unsupported")),
    F::so_far(
        "php_stacks",
        "Stacks (weighted) with at least one PHP frame.",
        |c| c.frames.stacks,
    ),
    F::so_far(
        "php_frames_emitted",
        "PHP frames exported (weighted).",
        |c| c.frames.frames,
    ),
    F::so_far(
        "php_frames_unreadable",
        "PHP frames whose function could not be read (weighted).",
        |c| c.frames.unreadable,
    ),
    F::so_far(
        "php_frames_dropped",
        "PHP frames dropped: their process has no executor known to sonde (weighted).",
        |c| c.frames.dropped,
    ),
    F::mean(
        "php_frames_per_stack",
        "PHP frames per PHP walk in the last window.",
        stat::PHP_FRAMES,
        stat::PHP_WALKS,
    ),
    F::kernel(
        "php_walks",
        stat::PHP_WALKS,
        "Stacks of PHP processes whose PHP frames were walked.",
    ),
    F::kernel(
        "php_frames",
        stat::PHP_FRAMES,
        "PHP frames stored by those walks.",
    ),
    F::kernel(
        "php_no_context",
        stat::PHP_NO_CONTEXT,
        "PHP walks of processes running no PHP code (an idle php-fpm worker, start-up; not a failure).",
    ),
    F::kernel(
        "php_read_fault",
        stat::PHP_READ_FAULT,
        "PHP walks that ended early: executor memory was unreadable.",
    ),
    F::kernel(
        "php_truncated",
        stat::PHP_TRUNCATED,
        "PHP walks cut because the stack was full.",
    ),
];
