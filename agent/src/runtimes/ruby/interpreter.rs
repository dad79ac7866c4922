//! CRuby as an interpreter of appended frames (`runtimes::appended`): its frames run instruction
//! sequence bodies ([`Iseq`]), and its loop is `vm_exec_core`, which `rb_vm_exec` (exported by every
//! CRuby) calls. Distributions strip `vm_exec_core`'s name (it is static), so a loop frame is the one
//! right below an `rb_vm_exec` frame, named `vm_exec_core` or not named at all; where there is none
//! (a JIT's frame in between), `rb_vm_exec` itself. A YJIT frame is a loop frame of its own: its code
//! runs the frames of its VM call.

use super::{
    iseq::{Iseq, MethodOf},
    jit,
    vm::RubyVm,
};
use crate::{
    profile::{Frame, Symbol},
    runtimes::{Runtime, appended::Interpreter, memory::ProcessMemory},
};

/// The VM's exported entry to its loop.
const VM_EXEC: &str = "rb_vm_exec";
/// The loop itself, where a binary keeps its name.
const VM_EXEC_CORE: &str = "vm_exec_core";

/// CRuby.
pub(crate) struct Ruby;

impl Interpreter for Ruby {
    type Vm = RubyVm;
    type Code = Iseq;
    const RUNTIME: Runtime = Runtime::Ruby;
    const TAG: u64 = sonde_abi::appended::RUBY;
    const PATH: &'static str = "[ruby]";

    fn read(memory: &ProcessMemory, vm: &RubyVm, body: u64) -> Option<Iseq> {
        Iseq::read(memory, &vm.layout, body)
    }

    /// `entry`: a method frame's method entry, announced with its body.
    fn note(memory: &ProcessMemory, vm: &RubyVm, body: u64, entry: u64) {
        vm.note_method(memory, body, entry);
    }

    /// Named by its method's class where known (`super::owner`), else by its label.
    fn symbol(vm: &RubyVm, iseq: &Iseq, position: u32) -> Symbol {
        let named = |m: &MethodOf| {
            let class = vm.method_class(m.body)?;
            Some(format!("{}{}", m.prefix, class.name(&m.name)))
        };
        let name = iseq
            .method
            .as_ref()
            .and_then(named)
            .unwrap_or_else(|| iseq.label.clone());
        Symbol {
            name,
            file: Some(iseq.file.clone()),
            line: Some(iseq.line(position)),
        }
    }

    /// Final once its method's class is known (or it runs in no method, or never will be: the
    /// versions whose class paths sonde does not read).
    fn settled(vm: &RubyVm, iseq: &Iseq) -> bool {
        !vm.layout.class_paths_in_variables
            || iseq
                .method
                .as_ref()
                .is_none_or(|m| vm.method_class(m.body).is_some())
    }

    fn is_loop(frames: &[Frame], i: usize) -> bool {
        /// Unnamed frames at most between YJIT's code and `rb_vm_exec`: the loop, then the call.
        const JIT_CALL_FRAMES: usize = 2;
        let is_exec = |f: &Frame| f.function() == Some(VM_EXEC);
        let is_core = |f: &Frame| f.function().is_none_or(|n| n.starts_with(VM_EXEC_CORE));
        // YJIT's code runs the frames of its VM call in place of the loop; the unnamed frames
        // between it and `rb_vm_exec` (the loop that called into it, the call) are that same VM
        // call's, not loops of their own.
        if jit::is_jit(&frames[i]) {
            return true;
        }
        let below_jit = frames[..i]
            .iter()
            .rev()
            .take(JIT_CALL_FRAMES)
            .find(|f| jit::is_jit(f) || f.function().is_some())
            .is_some_and(jit::is_jit);
        if frames.get(i + 1).is_some_and(is_exec) && is_core(&frames[i]) && !below_jit {
            return true;
        }
        is_exec(&frames[i]) && !(i > 0 && is_core(&frames[i - 1])) && !below_jit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::merge::{
        fixtures::{grouped as ruby, names, native_frame as frame},
        merge,
    };

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
            Ruby::is_loop,
        );
        assert_eq!(
            names(&out),
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

    /// YJIT (3.1): a C function its code called, its code, the call into it, `rb_vm_exec`. The
    /// Ruby frames take the JIT frame's place; the C function stays above them.
    #[test]
    fn a_yjit_frame_takes_its_group() {
        let native = vec![
            frame(Some("rb_hash_aref")),
            jit_frame(),
            frame(None),
            frame(Some("rb_vm_exec")),
            frame(Some("ruby_run_node")),
        ];
        assert!(Ruby::is_loop(&native, 1));
        assert!(!Ruby::is_loop(&native, 2) && !Ruby::is_loop(&native, 3));
        // Stripped `libruby`, called from the loop: its frame is as unnamed as the call's, and one
        // VM call's all the same.
        let mut from_loop = native.clone();
        from_loop.insert(3, frame(None));
        assert!((2..5).all(|i| !Ruby::is_loop(&from_loop, i)));
        let out = merge(
            native,
            vec![ruby("churn", false), ruby("<main>", true)],
            Ruby::is_loop,
        );
        assert_eq!(
            names(&out),
            [
                "rb_hash_aref",
                "churn",
                "<main>",
                "?",
                "rb_vm_exec",
                "ruby_run_node"
            ]
        );
    }

    fn jit_frame() -> Frame {
        let mut f = frame(None);
        f.module = Some(std::sync::Arc::new(crate::profile::Module {
            path: crate::process::JIT_PATH.into(),
            build_id: None,
            start: 0,
            limit: u64::MAX,
            file_offset: 0,
        }));
        f
    }

    /// A named frame right below `rb_vm_exec` (not the loop): `rb_vm_exec` stands for it.
    #[test]
    fn without_a_loop_frame_rb_vm_exec_is_the_loop() {
        let native = vec![frame(Some("jit_code")), frame(Some("rb_vm_exec"))];
        assert!(!Ruby::is_loop(&native, 0) && Ruby::is_loop(&native, 1));
        let named = vec![frame(Some("vm_exec_core")), frame(Some("rb_vm_exec"))];
        assert!(Ruby::is_loop(&named, 0) && !Ruby::is_loop(&named, 1));
    }
}
