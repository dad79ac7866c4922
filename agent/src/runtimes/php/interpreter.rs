//! PHP as an interpreter of appended frames (`runtimes::appended`): its frames run functions
//! ([`Function`], at the line the kernel read), and its loop is `execute_ex`, the executor every
//! build exports, or the JIT's code running on its frame (`super::jit`). One call of it runs a
//! file's code and every PHP function that code calls; a C function calling back into PHP
//! (`array_map`, `usort`, an autoloader) enters a new one.

use super::{function::Function, jit, vm::PhpVm};
use crate::{
    profile::{Frame, Symbol},
    runtimes::{Runtime, appended::Interpreter, memory::ProcessMemory},
};

/// The executor's loop.
const EXECUTE_EX: &str = "execute_ex";

/// PHP.
pub(crate) struct Php;

impl Interpreter for Php {
    type Vm = PhpVm;
    type Code = Function;
    const RUNTIME: Runtime = Runtime::Php;
    const TAG: u64 = sonde_abi::appended::PHP;
    const PATH: &'static str = "[php]";

    fn read(memory: &ProcessMemory, vm: &PhpVm, func: u64) -> Option<Function> {
        Function::read(memory, &vm.layout, func)
    }

    fn symbol(_vm: &PhpVm, function: &Function, line: u32) -> Symbol {
        Symbol {
            name: function.name.clone(),
            file: Some(function.file.clone()),
            line: Some(function.line(line)),
        }
    }

    fn is_loop(frames: &[Frame], i: usize) -> bool {
        frames[i].function() == Some(EXECUTE_EX) || jit::is_jit(&frames[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::merge::{
        fixtures::{grouped as php, names, native_frame},
        merge,
    };

    fn frame(name: &str) -> Frame {
        native_frame(Some(name))
    }

    /// A closure `array_map` (C) calls runs in an executor call of its own, above the C function's
    /// native frames; its caller and the file's code share the first one.
    #[test]
    fn each_executor_call_takes_its_group() {
        let native = vec![
            frame("execute_ex"),
            frame("zend_call_function"),
            frame("zif_array_map"),
            frame("execute_ex"),
            frame("zend_execute"),
            frame("main"),
        ];
        let out = merge(
            native,
            vec![
                php("{closure}", true),
                php("Worker::alpha", false),
                php("{main}", true),
            ],
            Php::is_loop,
        );
        assert_eq!(
            names(&out),
            [
                "{closure}",
                "zend_call_function",
                "zif_array_map",
                "Worker::alpha",
                "{main}",
                "zend_execute",
                "main"
            ]
        );
    }
}
