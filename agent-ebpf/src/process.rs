//! Process lifecycle: tells userspace when a process is first sampled (so it can capture the process's
//! mappings and binaries while the process is alive, and load their unwind tables), when it execs and
//! when it exits.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
};
use sonde_abi::{ProcEvent, proc_event};

use crate::{
    Failed, globals,
    maps::{PROC_MAPPINGS, SEEN, send_proc_event},
};

/// Announces `tgid` to userspace the first time it is sampled.
#[inline(always)]
pub fn announce(tgid: u32) {
    if SEEN.get_ptr(tgid).is_some() {
        return;
    }
    if SEEN.insert(tgid, 0u8, BPF_NOEXIST as u64).is_err() {
        return; // another CPU announced it first
    }
    if send(proc_event::FIRST_SEEN, tgid).is_err() {
        // Lost (counted): forget it so the next sample announces it again. If the removal fails too,
        // the process stays unannounced and its frames unsymbolized; the lost event is counted.
        let _ = SEEN.remove(tgid);
    }
}

/// Handles `sched:sched_process_exec`: mappings of an announced process changed. The old mappings are
/// forgotten at once so no sample of the new image is unwound with the old one's tables.
///
/// Test hook: with the load-time global `TEST_FAIL_EXEC` set (only tests set it), every exec fails
/// before doing anything, so a test can see a failure counted and logged.
#[inline(always)]
pub fn exec() -> Result<(), Failed> {
    if globals::test_fail_exec() != 0 {
        return Err(Failed::TestHook);
    }
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // Absent for processes without tables: nothing to forget.
    let _ = PROC_MAPPINGS.remove(tgid);
    crate::binaries::exec(tgid);
    let new_binary = crate::vmas::exec(tgid);
    if SEEN.remove(tgid).is_ok() {
        send(proc_event::EXEC, tgid).map_err(Failed::EventLost)?;
    }
    // A program whose table the kernel does not have: announced now rather than at its first sample,
    // so userspace builds its table while this process lives (it may live milliseconds) and the
    // next processes of it are walked with it from their first sample.
    if new_binary {
        announce(tgid);
    }
    Ok(())
}

/// Handles `sched:sched_process_exit` (fires once per exiting thread).
#[inline(always)]
pub fn exit() -> Result<(), Failed> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    crate::vmas::exit(tid);
    if tid == tgid {
        crate::binaries::exited(tgid);
    }
    // The leader's exit is reported; userspace checks whether other threads live on (a process whose
    // main thread exited keeps running) before it forgets the process and its mappings.
    if tid == tgid && SEEN.remove(tgid).is_ok() {
        send(proc_event::EXIT, tgid).map_err(Failed::EventLost)?;
    }
    Ok(())
}

#[inline(always)]
fn send(kind: u32, tgid: u32) -> Result<(), i32> {
    send_proc_event(&ProcEvent {
        kind,
        tgid,
        // SAFETY: no preconditions; the helper reads the monotonic clock.
        time_ns: unsafe { bpf_ktime_get_ns() },
        address: 0,
        data: 0,
        extra: 0,
    })
}
