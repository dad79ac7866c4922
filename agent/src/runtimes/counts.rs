//! What the runtimes count: per frame of a stack ([`FrameTally`]), per runtime since start
//! ([`RuntimeCounts`]: processes found by its capture, frames and binaries named by its namer), and
//! all of them ([`RuntimeStats`]), which the runtimes' figures read (`super::figures`).

use super::Runtime;

/// How naming one runtime frame went (the same for every runtime whose frames the kernel stores in
/// place: a frame is named, or counted unreadable or stale and left unnamed, never misnamed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Named.
    Named,
    /// Its object (method, code, function) could not be read (counted `unreadable`).
    Unreadable,
    /// Its object changed since the sample: freed, moved or replaced (counted `stale`).
    Stale,
}

/// Counters of one runtime's in-place frames, cumulative and weighted by sample count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RuntimeFrameStats {
    /// Stacks with at least one frame of the runtime.
    pub stacks: u64,
    /// Frames emitted (also in the symbolizer's `frames`, and in `symbolized` when named).
    pub frames: u64,
    /// Of those, frames whose object could not be read (left unnamed).
    pub unreadable: u64,
    /// Of those, frames whose object was freed, moved or replaced between the sample and its naming
    /// (the validation value differs): left unnamed, never misnamed.
    pub stale: u64,
    /// Runtime words dropped from stacks because they do not pair up (a head without its data word,
    /// or a data word alone): a stack the kernel stored wrongly.
    pub corrupt: u64,
    /// Frames dropped because their process has no runtime known to sonde.
    pub dropped: u64,
}

/// One runtime's frames of one stack, for the counters.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FrameTally {
    pub(crate) frames: u64,
    pub(crate) unreadable: u64,
    pub(crate) stale: u64,
    pub(crate) dropped: u64,
    /// Words that did not pair up.
    pub(crate) corrupt: u64,
}

impl FrameTally {
    /// Counts a frame named with `outcome`.
    pub(crate) fn count(&mut self, outcome: Outcome) {
        self.frames += 1;
        match outcome {
            Outcome::Named => {}
            Outcome::Unreadable => self.unreadable += 1,
            Outcome::Stale => self.stale += 1,
        }
    }

    /// Adds this stack's counts, `weight` samples of it, to `stats`.
    pub(crate) fn add_to(&self, stats: &mut RuntimeFrameStats, weight: u64) {
        stats.stacks += weight * u64::from(self.frames > 0);
        stats.frames += weight * self.frames;
        stats.unreadable += weight * self.unreadable;
        stats.stale += weight * self.stale;
        stats.corrupt += weight * self.corrupt;
        stats.dropped += weight * self.dropped;
    }
}

/// Counters of the binaries a runtime reads for names of native code, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableStats {
    /// Binaries read in full.
    pub read: u64,
    /// Binaries read in part (Go: without the inline tree, physical functions only).
    pub partial: u64,
    /// Binaries whose table could not be read (unknown layout, malformed): ELF symbols only.
    pub failed: u64,
}

/// Processes a runtime was found in, cumulative (each counted once per process image).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcessCounts {
    /// Processes running the runtime in a version and layout sonde supports.
    pub found: u64,
    /// Processes running it in a version or layout sonde cannot read (said once per binary): its
    /// frames stay native, or `[jit]`; for Go, binaries whose goroutine labels cannot be read.
    pub unsupported: u64,
    /// Processes whose runtime was not set up yet when captured (starting): looked at again.
    pub not_ready: u64,
    /// Of those, processes given up on.
    pub abandoned: u64,
}

/// One runtime's counters: the processes it was found in and the frames and binaries it named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RuntimeCounts {
    pub processes: ProcessCounts,
    pub frames: RuntimeFrameStats,
    pub tables: TableStats,
}

/// Every runtime's counters, cumulative, by runtime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RuntimeStats([RuntimeCounts; Runtime::ALL.len()]);

impl RuntimeStats {
    /// `runtime`'s counters.
    pub(crate) fn of(&self, runtime: Runtime) -> RuntimeCounts {
        self.0[runtime as usize]
    }

    /// `runtime`'s counters, to add to or set.
    pub(crate) fn of_mut(&mut self, runtime: Runtime) -> &mut RuntimeCounts {
        &mut self.0[runtime as usize]
    }
}
