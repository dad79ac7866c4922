//! Java frames in symbolized stacks: the HotSpot walker stores them in place among the native frames
//! (`sonde_abi::hotspot` kinds); each is named from the JVM's methods and code read by
//! [`JavaNames`], which the capture fills as the kernel announces them.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, MutexGuard},
};

use sonde_abi::{hotspot::is_java_kind, runtime_frame::RuntimeFrame};

use super::{JavaNames, jvm_of};
use crate::{
    process::ProcessInfo,
    profile::Frame,
    runtimes::{Outcome, Runtime, seam::RuntimeNames},
};

/// Names Java frames from the shared [`JavaNames`].
pub(crate) struct JavaNaming {
    names: Arc<Mutex<JavaNames>>,
}

impl JavaNaming {
    pub(crate) fn new(names: Arc<Mutex<JavaNames>>) -> Self {
        Self { names }
    }

    fn names(&self) -> MutexGuard<'_, JavaNames> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RuntimeNames for JavaNaming {
    fn runtime(&self) -> Runtime {
        Runtime::Java
    }

    fn owns(&self, kind: u64) -> bool {
        is_java_kind(kind)
    }

    fn resolve(&self, process: &ProcessInfo, ips: &[u64]) {
        let Some(jvm) = jvm_of(process) else { return };
        let mut names = self.names();
        for frame in
            crate::runtimes::stack_words::runtime_frames(ips).filter(|f| is_java_kind(f.kind))
        {
            names.resolve(process.pid, &jvm, frame);
        }
    }

    fn frame(
        &self,
        process: Option<&ProcessInfo>,
        frame: RuntimeFrame,
        _native: &dyn Fn(u64) -> Frame,
    ) -> Option<(Frame, Outcome)> {
        let process = process?;
        let jvm = jvm_of(process)?;
        Some(self.names().frame(process.pid, &jvm, frame))
    }

    fn trim(&mut self) {
        self.names().trim();
    }

    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, pids: &HashSet<u32>) {
        self.names().retain(pids);
    }
}
