//! Kernel diagnostics: the programs' failed invocations (an unexpected helper errno, a configuration
//! mismatch, a lost process event), logged by the kernel through aya-log and bridged into `tracing`.
//!
//! Off by default. The loader turns it on when the kernel's target is enabled at debug level
//! (`--log sonde::bpf=debug` or `--log sonde::bpf::kernel=debug`, or the same in `SONDE_LOG`) or when
//! [`super::options::LoadOptions::kernel_log`] asks for it. It then sets the read-only global `KERNEL_LOG` so the programs' log calls are kept, and
//! starts a thread that reads aya-log's `AYA_LOGS` ring buffer. Off, the verifier prunes every log
//! call, the ring buffer is shrunk to one page and no thread runs.
//!
//! aya-log hands each record to the `log` crate; the `tracing` subscriber installed by
//! [`crate::telemetry`] also installs the `log` bridge (tracing-log), so a record becomes a `tracing`
//! event of target [`TARGET`] at debug level, filtered like every other event.

use std::{
    os::fd::AsRawFd as _,
    thread,
    time::{Duration, Instant},
};

use aya::Ebpf;

/// The `tracing` target of the kernel's records (set by the kernel side, `diag.rs`); debug enabled for
/// it turns the kernel log on.
pub(crate) const TARGET: &str = "sonde::bpf::kernel";

/// How long the reader sleeps in `poll` when nothing arrives.
const POLL_TIMEOUT: Duration = Duration::from_millis(200);
/// How often the reader checks that the programs are still loaded.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(1);

/// Whether the programs should log: asked for at load time, or debug enabled for [`TARGET`].
pub(crate) fn wanted(asked: bool) -> bool {
    asked || tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

/// Starts reading the kernel's log records on a thread of their own. `program` is the name of a loaded
/// program of `ebpf`: the thread ends (after a last read) once that program is unloaded, i.e. when
/// `ebpf` is dropped. A failure to start costs only the diagnostics, so it is a warning, not an error.
pub(crate) fn start(ebpf: &mut Ebpf, program: &str) {
    let id = match ebpf.program(program).map(aya::programs::Program::info) {
        Some(Ok(info)) => info.id(),
        Some(Err(err)) => {
            tracing::warn!(%err, program, "kernel log off: cannot identify the loaded programs");
            return;
        }
        None => {
            tracing::warn!(program, "kernel log off: program not in the object");
            return;
        }
    };
    let mut logger = match aya_log::EbpfLogger::init(ebpf) {
        Ok(logger) => logger,
        Err(err) => {
            tracing::warn!(%err, "kernel log off: cannot read the kernel's log records");
            return;
        }
    };
    let spawned = thread::Builder::new()
        .name("sonde-kernel-log".into())
        .spawn(move || {
            let mut checked = Instant::now();
            loop {
                wait_readable(logger.as_raw_fd(), POLL_TIMEOUT);
                logger.flush();
                if checked.elapsed() >= LIVENESS_INTERVAL {
                    checked = Instant::now();
                    if program_gone(id) {
                        // Records written before the programs went away.
                        logger.flush();
                        return;
                    }
                }
            }
        });
    match spawned {
        Ok(_) => tracing::debug!(target: TARGET, "kernel log on"),
        Err(err) => tracing::warn!(%err, "kernel log off: cannot start its reader thread"),
    }
}

/// Waits until `fd` is readable or `timeout` passes.
fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) {
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; the fd is owned by the logger, alive.
    let _ = unsafe { libc::poll(&mut pollfd, 1, timeout.as_millis() as libc::c_int) };
}

/// Whether the program with `id` is known to be unloaded. Listing programs needs `CAP_SYS_ADMIN`;
/// without it (or on any error) the answer is "not known", and the reader keeps going for the life of
/// the process. Ids count up to 2^31 before they are reused.
fn program_gone(id: u32) -> bool {
    let mut gone = true;
    for program in aya::programs::loaded_programs() {
        match program {
            Ok(program) if program.id() == id => return false,
            Ok(_) => {}
            Err(_) => gone = false,
        }
    }
    gone
}
