//! The OpenTelemetry thread context (OTEP 4947) as a runtime: a tracer (Datadog's `ddtrace` for
//! Python, libdatadog, any program that defines it) publishes the span each thread runs in through a
//! thread-local pointer, `otel_thread_ctx_v1`. sonde finds the variable as binaries are opened
//! ([`elf`]), resolves where each process's dynamic linker put it (`runtimes::tls`), reads the process's own
//! context (OTEP 4719: the names of the record's attribute keys, [`process_ctx`]) and hands both to
//! the kernel (`TC_PROCS`), which labels each sample with its trace and span
//! (agent-ebpf `thread_ctx.rs`). It names no frames.

pub(crate) mod capture;
pub(crate) mod elf;
pub(crate) mod figures;
pub(crate) mod process_ctx;
pub(crate) mod register;

/// The runtime's name (`--runtimes`), under which its facts and instances are kept.
pub(crate) const NAME: &str = "trace-context";

/// The variable the OTEP names.
pub(crate) const VARIABLE: &str = "otel_thread_ctx_v1";
