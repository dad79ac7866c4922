//! Go's figures: what its capture found, what its namer named and what its kernel walker
//! counted, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::{RuntimeFigure as F, series};

/// The help of the shared `/metrics` families these figures are series of.
pub(crate) const FAMILIES: &[(&str, &str)] = &[(
    "sonde_go_binaries",
    "Go binaries whose frames are named from their own .gopclntab, by outcome: read (with the inline tree), no_inline_tree (physical functions only) or failed (unknown layout or malformed; ELF symbols only).",
)];

/// The figures, in report order: the window's, then one per kernel counter of this runtime.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        "go_binaries_read",
        "Go binaries named from their .gopclntab with its inline tree.",
        |c| c.tables.read,
    )
    .at(series!("sonde_go_binaries", "outcome", "read")),
    F::so_far(
        "go_binaries_no_inline_tree",
        "Go binaries named from their .gopclntab without inline tree.",
        |c| c.tables.partial,
    )
    .at(series!("sonde_go_binaries", "outcome", "no_inline_tree")),
    F::so_far(
        "go_binaries_failed",
        "Go binaries whose .gopclntab could not be read (ELF symbols only).",
        |c| c.tables.failed,
    )
    .at(series!("sonde_go_binaries", "outcome", "failed")),
    F::so_far(
        "go_labels_unsupported",
        "Go binaries whose goroutine labels cannot be read (unknown version or TLS layout).",
        |c| c.processes.unsupported,
    ),
    F::kernel(
        "go_labeled",
        stat::GO_LABELED,
        "Samples of Go processes whose goroutine labels were copied.",
    ),
    F::kernel(
        "go_labels_cut",
        stat::GO_LABELS_CUT,
        "Samples of Go processes whose labels were cut to fit.",
    ),
    F::kernel(
        "go_labels_fault",
        stat::GO_LABELS_FAULT,
        "Samples of Go processes whose goroutine labels could not be read.",
    ),
];
