//! The Ruby frame cache: each instruction sequence body a stack names, read once per process, and
//! the frame of each (body, position) built once. Filled before a batch is named
//! ([`RubyNames::resolve`]), bounded between windows ([`RubyNames::trim`]).

use std::{
    collections::{HashMap, HashSet, hash_map::DefaultHasher},
    hash::{Hash as _, Hasher as _},
    sync::Arc,
};

use sonde_abi::ruby::RbFrame;

use super::{RUBY_PATH, iseq::Iseq, vm::RubyVm};
use crate::{
    profile::{Frame, FrameKind, Module, Symbol},
    runtimes::memory::ProcessMemory,
};

/// Bodies and frames held before the cache starts over.
const MAX_ENTRIES: usize = 200_000;

/// What is known of one process's Ruby code.
struct Process {
    vm: Arc<RubyVm>,
    /// Bodies by address: None when unreadable.
    bodies: HashMap<u64, Option<Iseq>>,
    /// Frames by (body, position).
    frames: HashMap<(u64, u32), Frame>,
}

/// The Ruby frame cache.
pub(crate) struct RubyNames {
    processes: HashMap<u32, Process>,
    entries: usize,
    module: Arc<Module>,
}

impl Default for RubyNames {
    fn default() -> Self {
        Self {
            processes: HashMap::new(),
            entries: 0,
            module: Arc::new(Module {
                path: RUBY_PATH.into(),
                build_id: None,
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
            }),
        }
    }
}

impl RubyNames {
    /// What is known of `pid`'s code, started over when it runs another image (an exec).
    fn process(&mut self, pid: u32, vm: &Arc<RubyVm>) -> &mut Process {
        let fresh = || Process {
            vm: vm.clone(),
            bodies: HashMap::new(),
            frames: HashMap::new(),
        };
        let process = self.processes.entry(pid).or_insert_with(fresh);
        if !Arc::ptr_eq(&process.vm, vm) {
            self.entries -= process.bodies.len() + process.frames.len();
            *process = fresh();
        }
        process
    }

    /// Reads the body at `body` in `pid` unless cached: at the window's end, or as soon as the
    /// kernel announces it (`proc_event::RUBY_ISEQ`), while it lives.
    pub(crate) fn read_body(&mut self, pid: u32, vm: &Arc<RubyVm>, body: u64) {
        let process = self.process(pid, vm);
        if process.bodies.contains_key(&body) {
            return;
        }
        let iseq = Iseq::read(&ProcessMemory::new(pid), &vm.layout, body);
        process.bodies.insert(body, iseq);
        self.entries += 1;
    }

    /// Reads the body of `frame` in `pid` unless cached, and builds its frame.
    pub(crate) fn resolve(&mut self, pid: u32, vm: &Arc<RubyVm>, frame: RbFrame) {
        if self
            .process(pid, vm)
            .frames
            .contains_key(&(frame.body, frame.position))
        {
            return;
        }
        self.read_body(pid, vm, frame.body);
        let module = self.module.clone();
        let process = self.process(pid, vm);
        let Some(Some(iseq)) = process.bodies.get(&frame.body) else {
            return;
        };
        let named = named_frame(&module, iseq, frame.position);
        process.frames.insert((frame.body, frame.position), named);
        self.entries += 1;
    }

    /// The frame of `frame` in `pid`, resolved before: named, or (body unreadable) the `[ruby]`
    /// mapping with the body's address and no name.
    pub(crate) fn frame(&self, pid: u32, vm: &Arc<RubyVm>, frame: RbFrame) -> Frame {
        self.processes
            .get(&pid)
            .filter(|p| Arc::ptr_eq(&p.vm, vm))
            .and_then(|p| p.frames.get(&(frame.body, frame.position)))
            .cloned()
            .unwrap_or_else(|| Frame {
                address: frame.body,
                kind: FrameKind::User,
                return_address: false,
                module: Some(self.module.clone()),
                symbols: Arc::from(Vec::new()),
            })
    }

    /// Drops the processes not in `live_pids`.
    pub(crate) fn retain(&mut self, live_pids: &HashSet<u32>) {
        let mut dropped = 0;
        self.processes.retain(|pid, p| {
            let keep = live_pids.contains(pid);
            if !keep {
                dropped += p.bodies.len() + p.frames.len();
            }
            keep
        });
        self.entries -= dropped;
    }

    /// Starts over beyond [`MAX_ENTRIES`]; bodies that could not be read are asked again next window
    /// (the read may have raced the body's creation).
    pub(crate) fn trim(&mut self) {
        if self.entries > MAX_ENTRIES {
            self.processes.clear();
            self.entries = 0;
            return;
        }
        for p in self.processes.values_mut() {
            let before = p.bodies.len();
            p.bodies.retain(|_, b| b.is_some());
            self.entries -= before - p.bodies.len();
        }
    }
}

/// The frame of `iseq` at `position`. Its address stands for (label, file, line), as Python's do:
/// two lines of a method stay two locations, and the same line in two processes is one.
fn named_frame(module: &Arc<Module>, iseq: &Iseq, position: u32) -> Frame {
    let line = iseq.line(position);
    let mut h = DefaultHasher::new();
    (&iseq.label, &iseq.file, line).hash(&mut h);
    Frame {
        address: h.finish() >> 1,
        kind: FrameKind::User,
        return_address: false,
        module: Some(module.clone()),
        symbols: Arc::from(vec![Symbol {
            name: iseq.label.clone(),
            file: Some(iseq.file.clone()),
            line: Some(line),
        }]),
    }
}
