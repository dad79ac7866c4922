//! sonde's kernel programs. Entry points only: each delegates to its module and never fails loudly in
//! the kernel; everything not aggregated, and every invocation that failed, is counted in `STATS`
//! (failures are also logged when the agent turns the kernel log on, see `diag`).
#![no_std]
#![no_main]
// Atomic adds on map values: the BPF target lacks `AtomicU64::fetch_add`.
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod binaries;
mod diag;
mod globals;
mod go_labels;
mod kernel_names;
mod label_sources;
mod labels;
mod maps;
mod off_cpu;
mod on_cpu;
mod process;
mod regs;
mod repeat;
mod runtime;
mod stack;
mod targets;
mod thread_ctx;
mod tls;
mod unwind;
mod user;
mod verifier;
mod vmas;

use aya_ebpf::{
    macros::{perf_event, raw_tracepoint, tracepoint},
    programs::{PerfEventContext, RawTracePointContext, TracePointContext},
};
pub use diag::Failed;
use runtime::walker;

/// Fires on every cpu-clock tick of every CPU (one perf event per CPU, at the sampling frequency):
/// hands the sample to the program that walks it (see `runtime`).
#[perf_event]
pub fn sonde_on_cpu(ctx: PerfEventContext) -> u32 {
    // First: a process the relabel rules drop costs this lookup and nothing more.
    if !targets::admit_sample((aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32) {
        return 0;
    }
    runtime::dispatch(&ctx, &maps::ONCPU_RUNTIMES);
    0
}

/// Tail-called by `sonde_on_cpu` for a sample of any process but a JVM's or Node.js's.
#[perf_event]
pub fn sonde_on_cpu_native(ctx: PerfEventContext) -> u32 {
    if let Err(failed) = on_cpu::sample::<{ walker::NATIVE }>(&ctx) {
        diag::report(&ctx, "sonde_on_cpu_native", failed);
    }
    0
}

/// Tail-called by `sonde_on_cpu` for a sample of a JVM.
#[perf_event]
pub fn sonde_on_cpu_java(ctx: PerfEventContext) -> u32 {
    if let Err(failed) = on_cpu::sample::<{ walker::JAVA }>(&ctx) {
        diag::report(&ctx, "sonde_on_cpu_java", failed);
    }
    0
}

/// Tail-called by `sonde_on_cpu` for a sample of a Node.js process.
#[perf_event]
pub fn sonde_on_cpu_v8(ctx: PerfEventContext) -> u32 {
    if let Err(failed) = on_cpu::sample::<{ walker::V8 }>(&ctx) {
        diag::report(&ctx, "sonde_on_cpu_v8", failed);
    }
    0
}

/// Fires on every context switch (`sched:sched_switch`), in the context of the task leaving the
/// CPU: ends the entering thread's episode, draws the leaving one's, and hands a tracked episode to
/// the program that walks that task's stacks.
#[tracepoint]
pub fn sonde_off_cpu(ctx: TracePointContext) -> u32 {
    match off_cpu::switch(&ctx) {
        Ok(true) => runtime::dispatch(&ctx, &maps::OFFCPU_RUNTIMES),
        Ok(false) => {}
        Err(failed) => diag::report(&ctx, "sonde_off_cpu", failed),
    }
    0
}

/// Tail-called by `sonde_off_cpu` for a tracked episode of any process but a JVM's or Node.js's.
#[tracepoint]
pub fn sonde_off_cpu_native(ctx: TracePointContext) -> u32 {
    if let Err(failed) = off_cpu::track::<{ walker::NATIVE }>(&ctx) {
        diag::report(&ctx, "sonde_off_cpu_native", failed);
    }
    0
}

/// Tail-called by `sonde_off_cpu` for a tracked episode of a JVM's thread.
#[tracepoint]
pub fn sonde_off_cpu_java(ctx: TracePointContext) -> u32 {
    if let Err(failed) = off_cpu::track::<{ walker::JAVA }>(&ctx) {
        diag::report(&ctx, "sonde_off_cpu_java", failed);
    }
    0
}

/// Tail-called by `sonde_off_cpu` for a tracked episode of a Node.js thread.
#[tracepoint]
pub fn sonde_off_cpu_v8(ctx: TracePointContext) -> u32 {
    if let Err(failed) = off_cpu::track::<{ walker::V8 }>(&ctx) {
        diag::report(&ctx, "sonde_off_cpu_v8", failed);
    }
    0
}

/// Fires when a process calls exec (`sched:sched_process_exec`).
#[tracepoint]
pub fn sonde_exec(ctx: TracePointContext) -> u32 {
    if let Err(failed) = process::exec() {
        diag::report(&ctx, "sonde_exec", failed);
    }
    0
}

/// Fires when `mmap` returns (`syscalls:sys_exit_mmap`): records executable file mappings of processes
/// that exec'd while the agent ran (see `vmas`).
#[tracepoint]
pub fn sonde_mmap(ctx: TracePointContext) -> u32 {
    vmas::mmap(&ctx);
    0
}

/// Fires when a task forks (`sched:sched_process_fork`): a child of a recorded process inherits its
/// record (see `vmas`).
#[tracepoint]
pub fn sonde_fork(ctx: TracePointContext) -> u32 {
    vmas::fork(&ctx);
    0
}

/// Fires when a thread exits (`sched:sched_process_exit`).
#[tracepoint]
pub fn sonde_exit(ctx: TracePointContext) -> u32 {
    off_cpu::forget_exiting_thread();
    if let Err(failed) = process::exit() {
        diag::report(&ctx, "sonde_exit", failed);
    }
    0
}

/// Never attached: userspace runs it (`BPF_PROG_TEST_RUN`) to name kernel addresses (see
/// `kernel_names`). The tracepoint only gives the section a name.
#[raw_tracepoint(tracepoint = "sonde_kernel_names")]
pub fn sonde_kernel_names(ctx: RawTracePointContext) -> i32 {
    kernel_names::name_all(&ctx);
    0
}

// A reachable panic must fail at verification, not at run time: the loop never terminates, which the
// verifier rejects.
#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
