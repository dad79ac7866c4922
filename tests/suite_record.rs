//! Integration tests: record. One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod bpf_kernel_log;
mod go_pprof_agreement;
mod go_stripped;
mod java_churn;
mod java_javac;
mod java_leaves;
mod java_offcpu;
mod java_recursion;
mod java_split;
mod node_cpuprof;
mod node_offcpu;
mod node_recursion;
mod node_split;
mod node_typescript;
mod node_workers;
mod record_bad_input;
mod record_cpu_split;
mod record_exited_process;
mod record_kernel_frames;
mod record_output_atomic;
mod record_pprof_format;
mod record_stripped;
mod record_warm_up;
mod symbols_debuginfod;
mod symbols_jit_perfmap;
mod symbols_local_files;
mod symbols_wire_format;
mod thread_names;
mod trace_context;
