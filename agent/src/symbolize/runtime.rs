//! Runtime frames in symbolized stacks: the kernel stores them in place among the native frames (two
//! words each, `words::in_place`), so each becomes one [`Frame`] where it was, named by its runtime's
//! cache, chosen by its kind: `runtimes::hotspot::JavaNames` for Java, `runtimes::v8::V8Names` for
//! JavaScript (one inline chain per frame, innermost first, as blazesym's native inline chains); and
//! counted per runtime.

use sonde_abi::{hotspot, runtime_frame::RuntimeFrame, v8};

use super::words::runtime_frames;
use crate::{
    process::ProcessInfo,
    profile::Frame,
    runtimes::{Outcome, RuntimeFrameStats, hotspot::JavaNames, v8::V8Names},
};

/// The runtimes' frame caches, locked for one stack or one batch.
pub(super) struct Caches<'a> {
    pub(super) java: &'a mut JavaNames,
    pub(super) v8: &'a mut V8Names,
}

/// Reads what the runtime frames of `ips` (a stack of `info`'s process) need, unless cached.
pub(super) fn resolve(caches: &mut Caches<'_>, info: &ProcessInfo, ips: &[u64]) {
    for frame in runtime_frames(ips) {
        if hotspot::is_java_kind(frame.kind) {
            if let Some(jvm) = &crate::runtimes::hotspot::jvm_of(info) {
                caches.java.resolve(info.pid, jvm, frame);
            }
        } else if frame.kind != v8::kind::MARKER
            && let Some(node) = &crate::runtimes::v8::node_of(info)
        {
            caches.v8.resolve(info.pid, node, frame);
        }
    }
}

/// One runtime's frames of one stack, for the counters.
#[derive(Default)]
pub(super) struct FrameCounts {
    frames: u64,
    unreadable: u64,
    stale: u64,
    dropped: u64,
}

impl FrameCounts {
    /// Counts a frame named with `outcome`.
    fn count(&mut self, outcome: Outcome) {
        self.frames += 1;
        match outcome {
            Outcome::Named => {}
            Outcome::Unreadable => self.unreadable += 1,
            Outcome::Stale => self.stale += 1,
        }
    }

    fn add_to(&self, stats: &mut RuntimeFrameStats, corrupt: u64, weight: u64) {
        stats.stacks += weight * u64::from(self.frames > 0);
        stats.frames += weight * self.frames;
        stats.unreadable += weight * self.unreadable;
        stats.stale += weight * self.stale;
        stats.corrupt += weight * corrupt;
        stats.dropped += weight * self.dropped;
    }
}

/// The runtime frames of one stack, for the counters.
#[derive(Default)]
pub(super) struct RuntimeCounts {
    java: FrameCounts,
    v8: FrameCounts,
    /// Runtime words that did not pair up (counted with Java's, the first runtime of this kind).
    pub(super) corrupt: u64,
}

impl RuntimeCounts {
    /// The frame of `frame` in `info`'s process (None: no runtime is known for it, and the frame is
    /// dropped, as nothing can name it). V8 markers are named by the caller (native code).
    pub(super) fn frame(
        &mut self,
        caches: &Caches<'_>,
        info: Option<&ProcessInfo>,
        frame: RuntimeFrame,
    ) -> Option<Frame> {
        let pid = info.map_or(0, |i| i.pid);
        if hotspot::is_java_kind(frame.kind) {
            let Some(jvm) = info.and_then(crate::runtimes::hotspot::jvm_of) else {
                self.java.dropped += 1;
                return None;
            };
            let (frame, outcome) = caches.java.frame(pid, &jvm, frame);
            self.java.count(outcome);
            return Some(frame);
        }
        let Some(node) = info.and_then(crate::runtimes::v8::node_of) else {
            self.v8.dropped += 1;
            return None;
        };
        let (frame, outcome) = caches.v8.frame(pid, &node, frame);
        self.v8.count(outcome);
        Some(frame)
    }

    /// Counts a V8 frame named as native code (a builtin or stub).
    pub(super) fn marker(&mut self) {
        self.v8.count(Outcome::Named);
    }

    /// Adds this stack's counts, `weight` samples of it, to the runtimes' stats.
    pub(super) fn add_to(
        &self,
        java: &mut RuntimeFrameStats,
        v8: &mut RuntimeFrameStats,
        weight: u64,
    ) {
        self.java.add_to(java, self.corrupt, weight);
        self.v8.add_to(v8, 0, weight);
    }
}
