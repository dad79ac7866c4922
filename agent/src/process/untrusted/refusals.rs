//! Counters of what sonde refused to read or build on a process's behalf, by input and reason. They
//! are process-wide atomics (any thread that reads process-controlled input counts into them), read
//! by `/metrics` and the `record` summary at report time.

use std::sync::atomic::{AtomicU64, Ordering};

/// What was refused: an input a profiled process controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// A JIT perf map, `/tmp/perf-PID.map` inside the process's root.
    PerfMap,
    /// A debug file looked up for a binary (debug link, `.build-id` directory).
    DebugFile,
    /// The file behind an executable mapping.
    Binary,
    /// A binary's call frame information (`.eh_frame`/`.debug_frame`) turned into an unwind table.
    UnwindTable,
    /// A runtime's code object read from the process's memory (CPython's code objects, their names
    /// and line tables).
    RuntimeCode,
}

/// Why it was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The path is or goes through a symbolic link where none is allowed.
    Symlink,
    /// Not a regular file (FIFO, socket, device, directory): reading it could block or act.
    NotRegular,
    /// Owned by neither the process's user nor root (perf's rule for perf maps).
    Owner,
    /// The process's own user could not read it (its mode bits).
    Permission,
    /// On a FUSE file system, which a process can serve itself and stall every read.
    Fuse,
    /// Larger than the bound for this input.
    TooLarge,
    /// A name that is not a plain file name (`../x`, `a/b`): a debug link must name a file, not a path.
    BadName,
    /// The per-process (or per-binary) budget for this input is spent.
    Budget,
}

impl Input {
    const ALL: [Input; 5] = [
        Input::PerfMap,
        Input::DebugFile,
        Input::Binary,
        Input::UnwindTable,
        Input::RuntimeCode,
    ];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Input::PerfMap => "perf_map",
            Input::DebugFile => "debug_file",
            Input::Binary => "binary",
            Input::UnwindTable => "unwind_table",
            Input::RuntimeCode => "runtime_code",
        }
    }

    /// The reasons this input can be refused for: the series `/metrics` always shows.
    fn reasons(self) -> &'static [Reason] {
        use Reason::*;
        match self {
            Input::PerfMap => &[Symlink, NotRegular, Owner, Permission, Fuse, Budget],
            Input::DebugFile => &[NotRegular, Permission, Fuse, TooLarge, BadName],
            Input::Binary => &[NotRegular, Fuse],
            Input::UnwindTable => &[TooLarge, Budget],
            Input::RuntimeCode => &[TooLarge, Budget],
        }
    }
}

impl Reason {
    const COUNT: usize = 8;

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Symlink => "symlink",
            Reason::NotRegular => "not_regular",
            Reason::Owner => "owner",
            Reason::Permission => "permission",
            Reason::Fuse => "fuse",
            Reason::TooLarge => "too_large",
            Reason::BadName => "bad_name",
            Reason::Budget => "budget",
        }
    }
}

static COUNTS: [[AtomicU64; Reason::COUNT]; Input::ALL.len()] =
    [const { [const { AtomicU64::new(0) }; Reason::COUNT] }; Input::ALL.len()];

/// Counts one refusal.
pub(crate) fn count(input: Input, reason: Reason) {
    debug_assert!(
        input.reasons().contains(&reason),
        "{input:?} refused for {reason:?}: add the pair to Input::reasons so it is published"
    );
    COUNTS[input as usize][reason as usize].fetch_add(1, Ordering::Relaxed);
}

/// Every (input, reason, count) series, zeros included, in a stable order.
pub(crate) fn snapshot() -> Vec<(&'static str, &'static str, u64)> {
    Input::ALL
        .iter()
        .flat_map(|&input| {
            input.reasons().iter().map(move |&reason| {
                (
                    input.as_str(),
                    reason.as_str(),
                    COUNTS[input as usize][reason as usize].load(Ordering::Relaxed),
                )
            })
        })
        .collect()
}

/// All refusals so far.
#[cfg(test)]
pub(crate) fn total() -> u64 {
    snapshot().iter().map(|s| s.2).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counted_pair_is_a_published_series() {
        // A pair counted but not listed would be counted and never shown.
        for input in Input::ALL {
            for reason in input.reasons() {
                assert!((*reason as usize) < Reason::COUNT);
            }
        }
        let before = snapshot();
        count(Input::PerfMap, Reason::Owner);
        let after = snapshot();
        let of = |s: &[(&str, &str, u64)]| {
            s.iter()
                .find(|e| e.0 == "perf_map" && e.1 == "owner")
                .unwrap()
                .2
        };
        assert_eq!(of(&after), of(&before) + 1);
    }
}
