//! Appended frames in symbolized stacks: an interpreter's walker appends them after the native
//! frames (`sonde_abi::appended` words); each is named from the objects [`AppendedNames`] read, then
//! merged in place of the loop's native frames (`runtimes::merge`).

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, MutexGuard},
};

use sonde_abi::appended::unpack;

use super::{Interpreter, names::AppendedNames, vm_of};
use crate::{
    process::ProcessInfo,
    profile::Frame,
    runtimes::{FrameTally, Runtime, merge::merge_appended, seam::RuntimeNames},
};

/// Names the frames of interpreter `I` from the shared [`AppendedNames`].
pub(crate) struct AppendedNaming<I: Interpreter> {
    names: Arc<Mutex<AppendedNames<I>>>,
}

impl<I: Interpreter> AppendedNaming<I> {
    pub(crate) fn new(names: Arc<Mutex<AppendedNames<I>>>) -> Self {
        Self { names }
    }

    fn names(&self) -> MutexGuard<'_, AppendedNames<I>> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<I: Interpreter> RuntimeNames for AppendedNaming<I> {
    fn runtime(&self) -> Runtime {
        I::RUNTIME
    }

    fn resolve(&self, process: &ProcessInfo, ips: &[u64]) {
        let Some(vm) = vm_of::<I>(process) else {
            return;
        };
        let mut names = self.names();
        for frame in ips.iter().filter_map(|&w| unpack(I::TAG, w)) {
            names.resolve(process.pid, &vm, frame);
        }
    }

    fn merge(
        &self,
        process: Option<&ProcessInfo>,
        ips: &[u64],
        native: Vec<Frame>,
        tally: &mut FrameTally,
    ) -> Vec<Frame> {
        let words: Vec<_> = ips
            .iter()
            .filter_map(|&w| unpack(I::TAG, w))
            .map(|w| (w, w.entry))
            .collect();
        let vm = process.and_then(|p| Some((p.pid, vm_of::<I>(p)?)));
        let names = self.names();
        let name = vm
            .as_ref()
            .map(|(pid, vm)| move |w: &_| names.frame(*pid, vm, *w));
        merge_appended(
            native,
            &words,
            name.as_ref().map(|f| f as _),
            I::is_loop,
            tally,
        )
    }

    fn trim(&mut self) {
        self.names().trim();
    }

    fn retain(&mut self, _binaries: &HashSet<(u64, u64)>, pids: &HashSet<u32>) {
        self.names().retain(pids);
    }
}
