//! Consumes the kernel's process events on a dedicated thread: captures a process when it is first
//! sampled (or after an exec), and marks it exited when it exits.

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

use super::ProcessTable;

/// The running event thread.
pub struct EventThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EventThread {
    /// Starts consuming `ring` into `table`.
    pub fn spawn(mut ring: RingBuf<MapData>, table: Arc<Mutex<ProcessTable>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("sonde-procs".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    wait_readable(&ring, 50);
                    drain(&mut ring, &table);
                }
                drain(&mut ring, &table);
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

fn drain(ring: &mut RingBuf<MapData>, table: &Mutex<ProcessTable>) {
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
    for ev in events {
        match ev.kind {
            proc_event::FIRST_SEEN | proc_event::EXEC => {
                table.capture(ev.tgid);
            }
            proc_event::EXIT => table.mark_exited(ev.tgid, Instant::now()),
            _ => {}
        }
    }
}
