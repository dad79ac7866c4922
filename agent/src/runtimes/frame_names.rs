//! The naming cache of every runtime whose frames the kernel stores in place (`sonde_abi::runtime_frame`:
//! HotSpot, V8), written once: what differs per runtime is what it reads of a process and how it
//! names a frame from that ([`ProcessCache`]); what is the same is here.
//!
//! Per process, remembering the runtime image it was filled for (a process captured again after an
//! exec has a new runtime `Arc`, and its old entries are dropped before any is used); processes gone
//! are dropped by [`FrameNames::retain`]; the whole cache starts over beyond its runtime's
//! [`ProcessCache::MAX_ENTRIES`] or [`ProcessCache::MAX_BYTES`], one process's beyond an eighth of the
//! entries (one process spraying addresses must not flush every other's names); what could not be
//! read is asked again the next window. Frames are named once each and kept with their outcome.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use sonde_abi::runtime_frame::RuntimeFrame;

use super::Outcome;
use crate::profile::{Frame, FrameKind, Module};

/// What one runtime reads of one process and how it names that process's frames.
pub(crate) trait ProcessCache {
    /// What the process runs (the JVM, `node`): another one (an exec) invalidates what was read.
    type Runtime;
    /// Pseudo path of the mapping every frame of the runtime is in (`[java]`, `[js]`).
    const PATH: &'static str;
    /// The runtime's frames, as the log names them ("Java").
    const WHAT: &'static str;
    /// Entries cached over all processes before the cache starts over.
    const MAX_ENTRIES: usize;
    /// Bytes cached over all processes before the cache starts over.
    const MAX_BYTES: usize;

    /// An empty cache for a process running `runtime`.
    fn new(runtime: &Arc<Self::Runtime>) -> Self;
    /// The runtime it was filled for.
    fn runtime(&self) -> &Arc<Self::Runtime>;
    /// Objects held.
    fn entries(&self) -> usize;
    /// Bytes held.
    fn bytes(&self) -> usize;
    /// Reads what `frame` of `pid` refers to now, as the kernel announces it, while it lives; failures
    /// are counted when the frame is named, if it still cannot be.
    fn preload(&mut self, pid: u32, frame: RuntimeFrame);
    /// Names `frame` of `pid`, reading what is missing; `module` is the runtime's pseudo mapping.
    fn name(
        &mut self,
        pid: u32,
        frame: RuntimeFrame,
        module: &Arc<Module>,
    ) -> Result<Frame, Outcome>;
    /// Forgets what could not be read, so it is asked again.
    fn forget_failures(&mut self);
}

/// A frame's cached result.
#[derive(Clone, Debug)]
enum Named {
    Frame(Frame),
    Failed(Outcome),
}

/// One process: what the runtime read, and the frames named from it.
struct Process<P> {
    cache: P,
    frames: HashMap<RuntimeFrame, Named>,
}

impl<P: ProcessCache> Process<P> {
    fn new(runtime: &Arc<P::Runtime>) -> Self {
        Self {
            cache: P::new(runtime),
            frames: HashMap::new(),
        }
    }

    fn entries(&self) -> usize {
        self.cache.entries() + self.frames.len()
    }

    fn runs(&self, runtime: &Arc<P::Runtime>) -> bool {
        Arc::ptr_eq(self.cache.runtime(), runtime)
    }
}

/// The frame cache of one runtime, over all processes.
pub(crate) struct FrameNames<P> {
    processes: HashMap<u32, Process<P>>,
    module: Arc<Module>,
}

impl<P: ProcessCache> Default for FrameNames<P> {
    fn default() -> Self {
        Self {
            processes: HashMap::new(),
            module: Arc::new(Module {
                path: P::PATH.into(),
                build_id: None,
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
            }),
        }
    }
}

impl<P: ProcessCache> FrameNames<P>
where
    P::Runtime: Send + Sync + 'static,
{
    /// Reads the frame a kernel announcement (`proc_event::RUNTIME_FRAME`) names, when it is of
    /// this runtime (`unpack` says) and `instance` is its runtime: the captures' `announced`.
    pub(crate) fn announced(
        names: &std::sync::Mutex<Self>,
        pid: u32,
        instance: &crate::process::RuntimeInstance,
        event: &sonde_abi::ProcEvent,
        unpack: fn(u64, u64) -> Option<RuntimeFrame>,
    ) -> bool {
        let frame = match event.kind {
            sonde_abi::proc_event::RUNTIME_FRAME => unpack(event.address, event.data),
            _ => None,
        };
        let (Some(frame), Some(runtime)) = (frame, super::seam::typed::<P::Runtime>(instance))
        else {
            return false;
        };
        let mut names = names.lock().expect("runtime frame names lock");
        names.preload(pid, &runtime, frame);
        true
    }
}

impl<P: ProcessCache> FrameNames<P> {
    /// The cache of `pid` running `runtime`, started over after an exec or beyond its budget.
    fn process(&mut self, pid: u32, runtime: &Arc<P::Runtime>) -> &mut Process<P> {
        let process = self
            .processes
            .entry(pid)
            .or_insert_with(|| Process::new(runtime));
        if !process.runs(runtime) {
            // Captured again (exec): nothing read from the old image may name the new one's frames.
            *process = Process::new(runtime);
        }
        if process.entries() >= P::MAX_ENTRIES / 8 {
            tracing::debug!(
                pid,
                "the {} names of process {pid} start over (too many)",
                P::WHAT
            );
            *process = Process::new(runtime);
        }
        process
    }

    /// Reads what `frame` of `pid` refers to now, as the kernel announces it
    /// (`proc_event::RUNTIME_FRAME`): the frames named at the window's end take what was read here
    /// (validated by the same check).
    pub(crate) fn preload(&mut self, pid: u32, runtime: &Arc<P::Runtime>, frame: RuntimeFrame) {
        self.process(pid, runtime).cache.preload(pid, frame);
    }

    /// Reads what `frame` of `pid` needs unless cached, and names it.
    pub(crate) fn resolve(&mut self, pid: u32, runtime: &Arc<P::Runtime>, frame: RuntimeFrame) {
        if self
            .processes
            .get(&pid)
            .is_some_and(|p| p.runs(runtime) && p.frames.contains_key(&frame))
        {
            return;
        }
        let module = self.module.clone();
        let process = self.process(pid, runtime);
        let named = match process.cache.name(pid, frame, &module) {
            Ok(frame) => Named::Frame(frame),
            Err(outcome) => Named::Failed(outcome),
        };
        process.frames.insert(frame, named);
    }

    /// The frame of `frame` in `pid`, resolved before, and how naming it went: named, or (unreadable,
    /// stale, not resolved) the runtime's pseudo mapping at the object's address with no name.
    pub(crate) fn frame(
        &self,
        pid: u32,
        runtime: &Arc<P::Runtime>,
        frame: RuntimeFrame,
    ) -> (Frame, Outcome) {
        let named = self
            .processes
            .get(&pid)
            .filter(|p| p.runs(runtime))
            .and_then(|p| p.frames.get(&frame));
        match named {
            Some(Named::Frame(f)) => (f.clone(), Outcome::Named),
            Some(Named::Failed(outcome)) => (self.unnamed(frame), *outcome),
            None => (self.unnamed(frame), Outcome::Unreadable),
        }
    }

    fn unnamed(&self, frame: RuntimeFrame) -> Frame {
        Frame {
            address: frame.address,
            kind: FrameKind::User,
            return_address: false,
            module: Some(self.module.clone()),
            symbols: Arc::from(Vec::new()),
        }
    }

    /// Drops the processes not in `live_pids`.
    pub(crate) fn retain(&mut self, live_pids: &HashSet<u32>) {
        self.processes.retain(|pid, _| live_pids.contains(pid));
    }

    /// Starts over beyond the runtime's budget (hot code comes back within a window), and forgets
    /// failures, so they are asked again. Call between windows, before [`Self::resolve`].
    pub(crate) fn trim(&mut self) {
        let (entries, bytes) = self
            .processes
            .values()
            .fold((0, 0), |(e, b), p| (e + p.entries(), b + p.cache.bytes()));
        if entries > P::MAX_ENTRIES || bytes > P::MAX_BYTES {
            self.processes.clear();
            return;
        }
        // A failed read may have raced the object's creation; a stale frame's words come back only
        // if sampled again. Either costs one small read next time.
        for p in self.processes.values_mut() {
            p.cache.forget_failures();
            p.frames.retain(|_, f| matches!(f, Named::Frame(_)));
        }
    }

    /// Entries held over all processes (tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.processes.values().map(Process::entries).sum()
    }
}
