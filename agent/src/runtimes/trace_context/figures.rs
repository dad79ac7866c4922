//! The thread context's figures: the processes its capture found, and what its kernel reader
//! counted per sample, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::RuntimeFigure as F;

/// Keys `sonde status` reads back.
pub(crate) const PROCESSES: &str = "trace_context_processes";
pub(crate) const LABELED: &str = "trace_context_labeled";
pub(crate) const OUTSIDE: &str = "trace_context_outside_span";
pub(crate) const TORN: &str = "trace_context_torn";
pub(crate) const FAULT: &str = "trace_context_fault";

/// The figures, in report order.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        PROCESSES,
        "Processes publishing an OpenTelemetry thread context whose samples are labelled with their spans.",
        |c| c.processes.found,
    ),
    F::so_far(
        "trace_context_unsupported",
        "Processes defining otel_thread_ctx_v1 whose thread-local storage sonde cannot place.",
        |c| c.processes.unsupported,
    ),
    F::kernel(
        LABELED,
        stat::TC_LABELED,
        "Samples of those processes labelled with the trace and span their thread ran in.",
    ),
    F::kernel(
        OUTSIDE,
        stat::TC_NONE,
        "Samples of those processes whose thread published no span.",
    ),
    F::kernel(
        TORN,
        stat::TC_TORN,
        "Samples whose span record was being written or replaced as it was read: kept without it.",
    ),
    F::kernel(
        FAULT,
        stat::TC_FAULT,
        "Samples whose thread context could not be read (thread pointer, DTV, variable or record).",
    ),
    F::kernel(
        "trace_context_attributes_cut",
        stat::TC_CUT,
        "Labelled samples that lost span attributes (too many, an unnamed key, or too long).",
    ),
];
