//! Ruby frames in symbolized stacks: the CRuby walker appends them after the native frames
//! (`sonde_abi::ruby` words); each is named from the instruction sequences [`RubyNames`] read, then
//! merged in place of the VM loop's native frames (`runtimes::merge`).
//!
//! The loop is `vm_exec_core`, which `rb_vm_exec` (exported by every CRuby) calls. Distributions
//! strip `vm_exec_core`'s name (it is static), so a loop frame is the one right below an
//! `rb_vm_exec` frame, named `vm_exec_core` or not named at all; where there is none (a JIT's frame
//! in between), `rb_vm_exec` itself.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, MutexGuard},
};

use sonde_abi::ruby::unpack_frame;

use super::{names::RubyNames, vm_of};
use crate::{
    process::ProcessInfo,
    profile::Frame,
    runtimes::{FrameTally, Runtime, merge::merge_appended, seam::RuntimeNames},
};

/// The VM's exported entry to its loop.
const VM_EXEC: &str = "rb_vm_exec";
/// The loop itself, where a binary keeps its name.
const VM_EXEC_CORE: &str = "vm_exec_core";

/// Names Ruby frames from the shared [`RubyNames`].
pub(crate) struct RubyNaming {
    names: Arc<Mutex<RubyNames>>,
}

impl RubyNaming {
    pub(crate) fn new(names: Arc<Mutex<RubyNames>>) -> Self {
        Self { names }
    }

    fn names(&self) -> MutexGuard<'_, RubyNames> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether native frame `i` of `frames` (leaf to root) is a call of the VM's loop.
fn is_loop(frames: &[Frame], i: usize) -> bool {
    let is_exec = |f: &Frame| f.function() == Some(VM_EXEC);
    let is_core = |f: &Frame| f.function().is_none_or(|n| n.starts_with(VM_EXEC_CORE));
    if frames.get(i + 1).is_some_and(is_exec) && is_core(&frames[i]) {
        return true;
    }
    is_exec(&frames[i]) && !(i > 0 && is_core(&frames[i - 1]))
}

impl RuntimeNames for RubyNaming {
    fn runtime(&self) -> Runtime {
        Runtime::Ruby
    }

    fn resolve(&self, process: &ProcessInfo, ips: &[u64]) {
        let Some(vm) = vm_of(process) else {
            return;
        };
        let mut names = self.names();
        for frame in ips.iter().filter_map(|&w| unpack_frame(w)) {
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
            .filter_map(|&w| unpack_frame(w))
            .map(|w| (w, w.finish))
            .collect();
        let vm = process.and_then(|p| Some((p.pid, vm_of(p)?)));
        let names = self.names();
        let name = vm
            .as_ref()
            .map(|(pid, vm)| move |w: &_| names.frame(*pid, vm, *w));
        merge_appended(
            native,
            &words,
            name.as_ref().map(|f| f as _),
            is_loop,
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        profile::{FrameKind, Symbol},
        runtimes::merge::{GroupedFrame, merge},
    };

    fn frame(name: Option<&str>) -> Frame {
        Frame {
            address: 0x1000,
            kind: FrameKind::User,
            return_address: false,
            module: None,
            symbols: Arc::from(
                name.map(|n| Symbol {
                    name: n.into(),
                    file: None,
                    line: None,
                })
                .into_iter()
                .collect::<Vec<_>>(),
            ),
        }
    }

    fn ruby(name: &str, finish: bool) -> GroupedFrame {
        GroupedFrame {
            frame: frame(Some(name)),
            entry: finish,
        }
    }

    /// Debian's stripped libruby: `vm_exec_core` unnamed below each `rb_vm_exec`; a block run by
    /// `Integer#times` (C) is its own loop call.
    #[test]
    fn each_unnamed_loop_frame_takes_its_group() {
        let native = vec![
            frame(None),
            frame(Some("rb_vm_exec")),
            frame(Some("rb_yield")),
            frame(Some("rb_int_times")),
            frame(None),
            frame(Some("rb_vm_exec")),
            frame(Some("ruby_run_node")),
            frame(Some("main")),
        ];
        let out = merge(
            native,
            vec![
                ruby("block in work", true),
                ruby("work", false),
                ruby("<main>", true),
            ],
            is_loop,
        );
        let names: Vec<&str> = out.iter().map(|f| f.function().unwrap_or("?")).collect();
        assert_eq!(
            names,
            [
                "block in work",
                "rb_vm_exec",
                "rb_yield",
                "rb_int_times",
                "work",
                "<main>",
                "rb_vm_exec",
                "ruby_run_node",
                "main"
            ]
        );
    }

    /// A named frame right below `rb_vm_exec` (not the loop): `rb_vm_exec` stands for it.
    #[test]
    fn without_a_loop_frame_rb_vm_exec_is_the_loop() {
        let native = vec![frame(Some("jit_code")), frame(Some("rb_vm_exec"))];
        assert!(!is_loop(&native, 0) && is_loop(&native, 1));
        let named = vec![frame(Some("vm_exec_core")), frame(Some("rb_vm_exec"))];
        assert!(is_loop(&named, 0) && !is_loop(&named, 1));
    }
}
