//! V8's figures: what its capture found, what its namer named and what its kernel walker
//! counted, declared once here and rendered by every report (`crate::figures`).

use sonde_abi::stat;

use crate::runtimes::figures::{RuntimeFigure as F, series};

/// The help of the shared `/metrics` families these figures are series of.
pub(crate) const FAMILIES: &[(&str, &str)] = &[(
    "sonde_node_processes",
    "Processes found running Node.js (V8), by whether sonde names their JavaScript frames (supported) or leaves them [jit] (unsupported).",
)];

/// The figures, in report order: the window's, then one per kernel counter of this runtime.
pub(crate) const FIGURES: &[F] = &[
    F::so_far(
        "node_processes",
        "Processes running Node.js sonde walks.",
        |c| c.processes.found,
    )
    .at(series!("sonde_node_processes", "support", "supported")),
    F::so_far(
        "node_unsupported",
        "Processes running a V8 sonde cannot walk (JavaScript frames stay [jit]).",
        |c| c.processes.unsupported,
    )
    .at(series!("sonde_node_processes", "support", "unsupported")),
    F::so_far(
        "v8_stacks",
        "Stacks (weighted) with at least one JavaScript or V8 frame.",
        |c| c.frames.stacks,
    ),
    F::so_far(
        "v8_frames_emitted",
        "JavaScript and V8 frames exported (weighted).",
        |c| c.frames.frames,
    ),
    F::so_far(
        "v8_frames_unreadable",
        "JavaScript frames whose function or code could not be read (weighted).",
        |c| c.frames.unreadable,
    ),
    F::so_far(
        "v8_frames_stale",
        "JavaScript frames whose function or code was moved or collected before naming (weighted).",
        |c| c.frames.stale,
    ),
    F::so_far(
        "v8_frames_dropped",
        "JavaScript frames dropped: their process has no V8 known to sonde (weighted).",
        |c| c.frames.dropped,
    ),
    F::mean(
        "v8_frames_per_stack",
        "JavaScript and V8 frames per walk of a Node.js stack in the last window.",
        stat::V8_FRAMES,
        stat::V8_WALKS,
    ),
    F::kernel(
        "v8_walks",
        stat::V8_WALKS,
        "Stacks of Node.js processes walked for JavaScript frames.",
    ),
    F::kernel(
        "v8_frames",
        stat::V8_FRAMES,
        "JavaScript and V8 frames stored by those walks.",
    ),
    F::kernel(
        "v8_not_a_frame",
        stat::V8_NOT_A_FRAME,
        "Frames in V8 code whose frame pointer led to no V8 frame (stepped as native code).",
    ),
    F::kernel(
        "v8_function_only",
        stat::V8_FUNCTION_ONLY,
        "JavaScript frames stored with their function only (Sparkplug code, or a pc outside its code).",
    ),
];
