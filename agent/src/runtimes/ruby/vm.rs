//! A Ruby VM found in a process: what capture keeps of it, and what the namer reads through.

use std::{
    collections::HashMap,
    sync::{Mutex, OnceLock},
};

use sonde_abi::ruby::RbProc;

use super::{
    offsets::Layout,
    owner::{ClassPaths, MethodClass},
};
use crate::runtimes::memory::ProcessMemory;

/// Methods whose class is remembered per process before the table starts over (bodies of `eval`'d
/// code come and go).
const MAX_METHODS: usize = 200_000;

/// A Ruby VM found in a process.
#[derive(Debug)]
pub(crate) struct RubyVm {
    /// The binary holding it.
    pub(crate) binary: String,
    pub(crate) layout: Layout,
    /// What the kernel was given.
    pub(crate) settings: RbProc,
    /// The run-time address of `rb_cObject`; 0 when the binary has none.
    object_class: u64,
    /// The ID of `__classpath__` in this process, once learned.
    classpath_id: OnceLock<u64>,
    /// The class of each method body read with its method entry.
    methods: Mutex<HashMap<u64, MethodClass>>,
}

impl RubyVm {
    pub(crate) fn new(binary: String, layout: Layout, settings: RbProc, object_class: u64) -> Self {
        Self {
            binary,
            layout,
            settings,
            object_class,
            classpath_id: OnceLock::new(),
            methods: Mutex::default(),
        }
    }

    /// The class paths of this process, through `memory`; None where they cannot be read (yet).
    fn class_paths<'a>(&'a self, memory: &'a ProcessMemory) -> Option<ClassPaths<'a>> {
        if let Some(&id) = self.classpath_id.get() {
            return Some(ClassPaths::with_id(memory, &self.layout, id));
        }
        let paths = ClassPaths::learn(memory, &self.layout, self.object_class)?;
        let _ = self.classpath_id.set(paths.id());
        Some(paths)
    }

    /// Notes the class of the method whose body is at `body`, from its method entry at `entry`,
    /// unless known.
    pub(crate) fn note_method(&self, memory: &ProcessMemory, body: u64, entry: u64) {
        if self.method_class(body).is_some() {
            return;
        }
        let Some(class) = self.class_paths(memory).and_then(|p| p.of_entry(entry)) else {
            return;
        };
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        if methods.len() >= MAX_METHODS {
            methods.clear();
        }
        methods.insert(body, class);
    }

    /// The class of the method whose body is at `body`, when it was read with its entry.
    pub(crate) fn method_class(&self, body: u64) -> Option<MethodClass> {
        let methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        methods.get(&body).cloned()
    }
}
