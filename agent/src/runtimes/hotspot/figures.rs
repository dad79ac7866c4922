//! HotSpot's figures: what its capture found, what its namer named and what its kernel walker
//! counted, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::{RuntimeFigure as F, series};

/// The help of the shared `/metrics` families these figures are series of.
pub(crate) const FAMILIES: &[(&str, &str)] = &[(
    "sonde_java_processes",
    "Processes found running a HotSpot JVM, by whether sonde names their Java frames (supported) or leaves them [jit] (unsupported).",
)];

/// The figures, in report order: the window's, then one per kernel counter of this runtime.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        "java_processes",
        "Processes running a HotSpot JVM sonde walks.",
        |c| c.processes.found,
    )
    .at(series!("sonde_java_processes", "support", "supported")),
    F::so_far(
        "java_unsupported",
        "Processes running a HotSpot JVM sonde cannot walk (Java frames stay [jit]).",
        |c| c.processes.unsupported,
    )
    .at(series!("sonde_java_processes", "support", "unsupported")),
    F::so_far(
        "java_not_ready",
        "Processes whose JVM had no code cache yet when captured (looked at again).",
        |c| c.processes.not_ready,
    ),
    F::so_far(
        "java_abandoned",
        "Processes whose JVM never showed a code cache (given up on).",
        |c| c.processes.abandoned,
    ),
    F::so_far(
        "java_stacks",
        "Stacks (weighted) with at least one Java frame.",
        |c| c.frames.stacks,
    ),
    F::so_far(
        "java_frames_emitted",
        "Java frames exported (weighted).",
        |c| c.frames.frames,
    ),
    F::so_far(
        "java_frames_unreadable",
        "Java frames whose method or code blob could not be read (weighted).",
        |c| c.frames.unreadable,
    ),
    F::so_far(
        "java_frames_stale",
        "Java frames whose method or code was freed or replaced before naming (weighted).",
        |c| c.frames.stale,
    ),
    F::so_far(
        "java_words_corrupt",
        "Java words dropped because they did not pair up (a stack stored wrongly).",
        |c| c.frames.corrupt,
    ),
    F::so_far(
        "java_frames_dropped",
        "Java frames dropped: their process has no JVM known to sonde (weighted).",
        |c| c.frames.dropped,
    ),
    F::mean(
        "java_frames_per_stack",
        "Java frames per walk of a JVM's stack in the last window.",
        stat::JAVA_FRAMES,
        stat::JAVA_WALKS,
    ),
    F::kernel(
        "java_walks",
        stat::JAVA_WALKS,
        "Stacks of JVM processes walked for Java frames.",
    ),
    F::kernel(
        "java_frames",
        stat::JAVA_FRAMES,
        "Java frames stored by those walks.",
    ),
    F::kernel(
        "java_no_blob",
        stat::JAVA_NO_BLOB,
        "Java walks cut at a code-heap pc whose code blob the segment map did not lead to.",
    ),
    F::kernel(
        "java_read_fault",
        stat::JAVA_READ_FAULT,
        "Java walks cut because a code blob, its name or an interpreter frame was unreadable.",
    ),
    F::kernel(
        "java_bad_frame",
        stat::JAVA_BAD_FRAME,
        "Java walks cut at a Java frame that could not be stepped.",
    ),
    F::kernel(
        "java_deopt",
        stat::JAVA_DEOPT,
        "Deoptimized compiled frames whose original pc was recovered.",
    ),
];
