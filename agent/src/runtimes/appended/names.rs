//! The frame cache of an interpreter whose frames are appended words: each object a stack names (a
//! Ruby instruction sequence body, a PHP function), read once per process, and the frame of each
//! (object, position) built once. Filled before a batch is named ([`AppendedNames::resolve`]) and as
//! the kernel announces objects ([`AppendedNames::read_object`]), bounded between windows
//! ([`AppendedNames::trim`]).

use std::{
    collections::{HashMap, HashSet, hash_map::DefaultHasher},
    hash::{Hash as _, Hasher as _},
    sync::Arc,
};

use sonde_abi::appended::Appended;

use super::Interpreter;
use crate::{
    profile::{Frame, FrameKind, Module, Symbol},
    runtimes::memory::ProcessMemory,
};

/// Objects and frames held before the cache starts over.
const MAX_ENTRIES: usize = 200_000;

/// What is known of one process's code.
struct Process<I: Interpreter> {
    vm: Arc<I::Vm>,
    /// Objects by address: None when unreadable.
    objects: HashMap<u64, Option<I::Code>>,
    /// Frames by (object, position).
    frames: HashMap<(u64, u32), Frame>,
    /// Frames whose names are not final yet (`Interpreter::settled`).
    unsettled: HashSet<(u64, u32)>,
}

/// The frame cache of interpreter `I`.
pub(crate) struct AppendedNames<I: Interpreter> {
    processes: HashMap<u32, Process<I>>,
    entries: usize,
    module: Arc<Module>,
}

impl<I: Interpreter> Default for AppendedNames<I> {
    fn default() -> Self {
        Self {
            processes: HashMap::new(),
            entries: 0,
            module: Arc::new(Module {
                path: I::PATH.into(),
                build_id: None,
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
            }),
        }
    }
}

impl<I: Interpreter> AppendedNames<I> {
    /// What is known of `pid`'s code, started over when it runs another image (an exec).
    fn process(&mut self, pid: u32, vm: &Arc<I::Vm>) -> &mut Process<I> {
        let fresh = || Process {
            vm: vm.clone(),
            objects: HashMap::new(),
            frames: HashMap::new(),
            unsettled: HashSet::new(),
        };
        let process = self.processes.entry(pid).or_insert_with(fresh);
        if !Arc::ptr_eq(&process.vm, vm) {
            self.entries -= process.objects.len() + process.frames.len();
            *process = fresh();
        }
        process
    }

    /// Reads the object at `object` in `pid` unless cached: at the window's end, or as soon as the
    /// kernel announces it (`proc_event::RUBY_ISEQ`, `PHP_FUNCTION`) with `detail` (0 for none),
    /// while it lives.
    pub(crate) fn read_object(&mut self, pid: u32, vm: &Arc<I::Vm>, object: u64, detail: u64) {
        let memory = ProcessMemory::new(pid);
        if detail != 0 {
            I::note(&memory, vm, object, detail);
        }
        let process = self.process(pid, vm);
        if process.objects.contains_key(&object) {
            return;
        }
        let code = I::read(&memory, vm, object);
        process.objects.insert(object, code);
        self.entries += 1;
    }

    /// Reads the object of `frame` in `pid` unless cached, and builds its frame.
    pub(crate) fn resolve(&mut self, pid: u32, vm: &Arc<I::Vm>, frame: Appended) {
        let key = (frame.object, frame.position);
        let process = self.process(pid, vm);
        if process.frames.contains_key(&key) && !process.unsettled.contains(&key) {
            return;
        }
        self.read_object(pid, vm, frame.object, 0);
        let module = self.module.clone();
        let process = self.process(pid, vm);
        let Some(Some(code)) = process.objects.get(&frame.object) else {
            return;
        };
        let named = named_frame(&module, I::symbol(vm, code, frame.position));
        match I::settled(vm, code) {
            true => process.unsettled.remove(&key),
            false => process.unsettled.insert(key),
        };
        if process.frames.insert(key, named).is_none() {
            self.entries += 1;
        }
    }

    /// The frame of `frame` in `pid`, resolved before: named, or (object unreadable) the
    /// interpreter's mapping with the object's address and no name.
    pub(crate) fn frame(&self, pid: u32, vm: &Arc<I::Vm>, frame: Appended) -> Frame {
        self.processes
            .get(&pid)
            .filter(|p| Arc::ptr_eq(&p.vm, vm))
            .and_then(|p| p.frames.get(&(frame.object, frame.position)))
            .cloned()
            .unwrap_or_else(|| Frame {
                address: frame.object,
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
                dropped += p.objects.len() + p.frames.len();
            }
            keep
        });
        self.entries -= dropped;
    }

    /// Starts over beyond [`MAX_ENTRIES`]; objects that could not be read are asked again next
    /// window (the read may have raced the object's creation).
    pub(crate) fn trim(&mut self) {
        if self.entries > MAX_ENTRIES {
            self.processes.clear();
            self.entries = 0;
            return;
        }
        for p in self.processes.values_mut() {
            let before = p.objects.len();
            p.objects.retain(|_, b| b.is_some());
            self.entries -= before - p.objects.len();
        }
    }
}

/// `RuntimeCapture::announced` of an interpreter whose announcements are `kind`: the object
/// `event` announces, read into `names` through `instance` while it lives.
pub(crate) fn announced<I: Interpreter>(
    names: &std::sync::Mutex<AppendedNames<I>>,
    kind: u32,
    pid: u32,
    instance: &crate::process::RuntimeInstance,
    event: &sonde_abi::ProcEvent,
) -> bool {
    if event.kind != kind {
        return false;
    }
    if let Some(vm) = crate::runtimes::seam::typed::<I::Vm>(instance) {
        let mut names = names.lock().unwrap_or_else(|e| e.into_inner());
        names.read_object(pid, &vm, event.address, event.data);
    }
    true
}

/// The frame of `symbol`. Its address stands for (name, file, line), as Python's do: two lines of a
/// function stay two locations, and the same line in two processes is one.
fn named_frame(module: &Arc<Module>, symbol: Symbol) -> Frame {
    let mut h = DefaultHasher::new();
    (&symbol.name, &symbol.file, symbol.line).hash(&mut h);
    Frame {
        address: h.finish() >> 1,
        kind: FrameKind::User,
        return_address: false,
        module: Some(module.clone()),
        symbols: Arc::from(vec![symbol]),
    }
}
