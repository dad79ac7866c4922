//! Why an invocation failed, counted always and logged (aya-log) only when the agent asks for it.
//!
//! Logging happens only here, on the entry points' error branches, never on a per-sample path or in
//! the unwinder. Each line is one failed invocation. Every log call is gated by the `KERNEL_LOG`
//! load-time global. It lives in read-only data, so when the agent leaves it at 0 the verifier
//! prunes the logging code and the programs run exactly as without it. The agent reads the records
//! from aya-log's `AYA_LOGS` ring buffer and turns them into `tracing` events of target
//! [`TARGET`] at debug level.
//!
//! Most steps guard array lookups at a constant index below the array's size. Kernel 6.18's verifier
//! knows those cannot miss and drops their branches, logging included; what stays is what can happen.

use aya_ebpf::EbpfContext;
use aya_log_ebpf::debug;
use sonde_abi::stat;

use crate::{globals, maps::bump};

/// The `tracing` target of the agent's kernel records (under `sonde::bpf`, so
/// `--log sonde::bpf=debug` shows them).
const TARGET: &str = "sonde::bpf::kernel";

/// The step at which a program invocation could not do its job.
#[derive(Clone, Copy)]
pub enum Failed {
    /// Reading the tracepoint record failed: the helper's errno.
    ContextRead(i32),
    /// A record offset set at load time lies outside the span read: the agent's configuration does
    /// not match what the program was built for.
    RecordLayout,
    /// The control block (`CONTROL[0]`) was not found.
    Control,
    /// The thread's off-CPU slot (`OFFCPU_THREADS`) was not found.
    ThreadSlot,
    /// This CPU's off-CPU sampling settings (`OFFCPU_SAMPLING[0]`) were not found.
    Sampling,
    /// The process-event ring buffer refused an event: the helper's errno. Already counted in
    /// `stat::PROC_EVENTS_LOST`.
    EventLost(i32),
    /// The test hook `TEST_FAIL_EXEC` asked the exec program to fail.
    TestHook,
}

/// Counts a failed invocation of `program` (in `stat::PROGRAM_ERRORS`, unless already counted where
/// it happened) and logs it when the kernel log is on.
#[inline(always)]
pub fn report<C: EbpfContext>(ctx: &C, program: &'static str, failed: Failed) {
    if !matches!(failed, Failed::EventLost(_)) {
        bump(stat::PROGRAM_ERRORS);
    }
    if globals::kernel_log() == 0 {
        return;
    }
    // One literal per step rather than a name argument: a string of variable length would need a copy
    // of variable length, which the verifier handles badly. The compiler keeps only the arms a program
    // can reach.
    match failed {
        Failed::ContextRead(errno) => debug!(
            ctx,
            target: TARGET,
            "{}: reading the tracepoint record failed (errno {})",
            program,
            errno
        ),
        Failed::RecordLayout => debug!(
            ctx,
            target: TARGET,
            "{}: record offsets set at load lie outside the span read",
            program
        ),
        Failed::Control => debug!(ctx, target: TARGET, "{}: control block lookup failed", program),
        Failed::ThreadSlot => debug!(
            ctx,
            target: TARGET,
            "{}: off-CPU thread slot lookup failed",
            program
        ),
        Failed::Sampling => debug!(
            ctx,
            target: TARGET,
            "{}: off-CPU sampling settings lookup failed",
            program
        ),
        Failed::EventLost(errno) => debug!(
            ctx,
            target: TARGET,
            "{}: process event lost (ring buffer, errno {})",
            program,
            errno
        ),
        Failed::TestHook => debug!(
            ctx,
            target: TARGET,
            "{}: failing on purpose (test hook TEST_FAIL_EXEC)",
            program
        ),
    }
}
