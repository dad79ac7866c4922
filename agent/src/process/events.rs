//! Consumes the kernel's process events on a dedicated thread: captures a process when it is first
//! sampled, after an exec, or when the kernel found code outside its known mappings, and marks it
//! exited when it exits. Every capture and exit is passed on to the unwinder (which builds tables on
//! its own thread, so this one never waits for it). Code objects the kernel announces in Python
//! processes are read here at once, while their process lives.

use std::{
    os::fd::AsRawFd as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Instant,
};

use aya::maps::{MapData, RingBuf};
use sonde_abi::{ProcEvent, proc_event};

use super::{ProcessTable, has_live_threads};
use crate::{runtimes::python::PythonNames, unwind::UnwindHandle};

/// The running event thread.
pub struct EventThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EventThread {
    /// Starts consuming `ring` into `table`, telling `unwinder` (when unwinding with tables), and
    /// reading announced Python code objects into `python`.
    pub(crate) fn spawn(
        mut ring: RingBuf<MapData>,
        table: Arc<Mutex<ProcessTable>>,
        unwinder: Option<UnwindHandle>,
        python: Arc<Mutex<PythonNames>>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("sonde-procs".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    wait_readable(&ring, 50);
                    drain(&mut ring, &table, unwinder.as_ref(), &python);
                }
                drain(&mut ring, &table, unwinder.as_ref(), &python);
            })
            .expect("spawning a thread");
        Self {
            stop,
            handle: Some(handle),
        }
    }

    /// Stops after handling what is queued.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn wait_readable(ring: &RingBuf<MapData>, timeout_ms: i32) {
    let mut fds = libc::pollfd {
        fd: ring.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&mut fds, 1, timeout_ms) };
}

fn drain(
    ring: &mut RingBuf<MapData>,
    table: &Mutex<ProcessTable>,
    unwinder: Option<&UnwindHandle>,
    python: &Mutex<PythonNames>,
) {
    let mut events = Vec::new();
    while let Some(item) = ring.next() {
        if item.len() >= std::mem::size_of::<ProcEvent>() {
            // SAFETY: the kernel wrote a ProcEvent (repr(C), plain data); read unaligned from the ring.
            events.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<ProcEvent>()) });
        }
    }
    if events.is_empty() {
        return;
    }
    let mut table = table.lock().expect("process table lock");
    let mut codes = Vec::new();
    for ev in events {
        match ev.kind {
            proc_event::PYTHON_CODE => codes.push(ev),
            proc_event::FIRST_SEEN | proc_event::EXEC | proc_event::MAPPINGS_STALE => {
                if let (Some(info), Some(unwinder)) = (table.capture(ev.tgid), unwinder) {
                    unwinder.process_changed(info);
                }
            }
            // Only the leader's exit is reported; the process lives on while other threads run.
            proc_event::EXIT if !has_live_threads(ev.tgid) => {
                table.mark_exited(ev.tgid, Instant::now());
                if let Some(unwinder) = unwinder {
                    unwinder.process_exited(ev.tgid);
                }
            }
            _ => {}
        }
    }
    // After the captures above, so a process's first code objects find its interpreter.
    if !codes.is_empty() {
        let mut python = python.lock().expect("python names lock");
        for ev in codes {
            if let Some(info) = table.get(ev.tgid)
                && let Some(interpreter) = &info.python
            {
                python.read_code(ev.tgid, interpreter, ev.address);
            }
        }
    }
}
