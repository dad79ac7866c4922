//! Integration tests: the interpreters walked after the native frames (CPython, CRuby, PHP). One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod php_phpcs;
mod php_split;
mod python_deep_recursion;
mod python_exited_process;
mod python_freed_module_code;
mod python_function_split;
mod python_mixed_stack;
mod python_off_switch;
mod python_offcpu_sleep;
mod python_other_builds;
mod python_pyspy_agreement;
mod python_short_lived;
mod python_threads;
mod ruby_rdoc;
mod ruby_split;
mod scripted_offcpu;
mod trace_context_ddtrace;
