//! Consumes the kernel's process events on a dedicated thread: captures a process when it is first
//! sampled, after an exec, or when the kernel found code outside its known mappings, and marks it
//! exited when it exits. Every capture and exit is passed on to the unwinder (which builds tables on
//! its own thread, so this one never waits for it). What the kernel announces in a runtime's
//! processes (code objects, the objects of runtime frames) is handed to the runtime at once, to read
//! while it lives, and processes a runtime waits for (a starting JVM) are looked at again here. A
//! runtime's kernel program, needed once its first process is published, is verified on a thread of
//! its own (a quarter of a second each): captures and announcements go on meanwhile, where a Python
//! script starting then would otherwise exit before it was read.

use std::{
    collections::HashSet,
    os::fd::AsRawFd as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc::Sender,
    },
    thread::JoinHandle,
    time::Instant,
};

use aya::maps::{MapData, RingBuf};
use sonde_abi::proc_event;

use super::Capturer;
use crate::{
    bpf::runtime_programs::RuntimePrograms, process::has_live_threads, runtimes::seam::RingEvent,
    targets::Targets, unwind::UnwindHandle,
};

/// The running event thread, and the thread loading the runtimes' programs.
pub(crate) struct EventThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    loader: Option<JoinHandle<()>>,
}

impl EventThread {
    /// Starts consuming `ring` into `table`, telling `unwinder` (when unwinding with tables), and
    /// handing what the kernel announces to the runtimes.
    pub(crate) fn spawn(
        mut ring: RingBuf<MapData>,
        table: Arc<Mutex<Capturer>>,
        unwinder: Option<UnwindHandle>,
        mut programs: RuntimePrograms,
        targets: Option<Arc<Targets>>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (load, to_load) = std::sync::mpsc::channel::<u32>();
        // Ends when the event thread drops its sender: the maps the programs name stay open until
        // then (see `RuntimePrograms`).
        let loader = std::thread::Builder::new()
            .name("sonde-programs".into())
            .spawn(move || {
                for index in to_load {
                    programs.ensure(index);
                }
            })
            .expect("spawning a thread");
        let handle = std::thread::Builder::new()
            .name("sonde-procs".into())
            .spawn(move || {
                let mut requests = ProgramRequests {
                    load,
                    asked: HashSet::new(),
                };
                loop {
                    // Asked to stop, it still handles what is queued, once.
                    let stopping = flag.load(Ordering::Relaxed);
                    if !stopping {
                        wait_readable(&ring, 50);
                    }
                    let (unwinding, targeting) = (unwinder.as_ref(), targets.as_deref());
                    drain(&mut ring, &table, unwinding, targeting, &mut requests);
                    if stopping {
                        break;
                    }
                    if let Some(targets) = &targets {
                        targets.refresh();
                    }
                    // JVMs captured while starting get their code cache within the next seconds.
                    // Never wait for the table here: the symbolizer may hold it for a while.
                    if let Ok(mut table) = table.try_lock() {
                        for info in table.retry() {
                            let kept = targets
                                .as_ref()
                                .is_none_or(|t| t.get_or_decide(info.pid).kept());
                            if let (Some(unwinder), true) = (&unwinder, kept) {
                                unwinder.process_changed(info);
                            }
                        }
                        requests.ask(&table);
                    }
                }
            })
            .expect("spawning a thread");
        Self {
            stop,
            handle: Some(handle),
            loader: Some(loader),
        }
    }

    /// Stops after handling what is queued.
    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        if let Some(h) = self.loader.take() {
            let _ = h.join();
        }
    }
}

/// The runtimes' kernel programs asked of the loader thread: each once, the first time one of its
/// processes is published.
struct ProgramRequests {
    load: Sender<u32>,
    asked: HashSet<u32>,
}

impl ProgramRequests {
    /// Asks for the programs `table`'s published processes need and were not asked for yet. Asked
    /// right after the capture that published them, not after the batch it came in: a batch of
    /// new processes (an agent's start on a busy node) takes seconds to capture, and until the
    /// program is loaded a runtime's processes are walked natively (`runtime_program_pending`).
    fn ask(&mut self, table: &Capturer) {
        for index in table.programs_needed() {
            if self.asked.insert(index) {
                let _ = self.load.send(index);
            }
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
    table: &Mutex<Capturer>,
    unwinder: Option<&UnwindHandle>,
    targets: Option<&Targets>,
    requests: &mut ProgramRequests,
) {
    let mut events = Vec::new();
    while let Some(item) = ring.next() {
        events.extend(RingEvent::from_record(&item));
    }
    if events.is_empty() {
        return;
    }
    let mut table = table.lock().expect("process table lock");
    // An announced object is read at once when its process is captured: the process may exit any
    // moment, and the captures of the batch (a busy node's new processes) may take a while.
    let mut uncaptured = Vec::new();
    for event in events {
        let ev = event.head;
        match ev.kind {
            // Read here when its process is captured (the guard reads it), else kept for later.
            kind if proc_event::is_announcement(kind) && !table.announced(&event) => {
                uncaptured.push(event)
            }
            proc_event::FIRST_SEEN | proc_event::EXEC | proc_event::MAPPINGS_STALE => {
                if ev.kind == proc_event::EXEC {
                    table.forget_image(ev.tgid);
                }
                let info = table.capture(ev.tgid);
                requests.ask(&table);
                // The rules decide at a process's first sample and again after an exec (a new
                // program: new comm, exe and runtime), before its next samples are walked.
                let mut kept = true;
                if let Some(targets) = targets
                    && ev.kind != proc_event::MAPPINGS_STALE
                {
                    let runtime = info
                        .as_ref()
                        .and_then(|i| i.runtimes.first().map(|(name, _)| *name));
                    kept = targets.decide(ev.tgid, runtime).kept();
                }
                // The agent's own process is left to frame pointers: its table (the agent binary:
                // 340k rows, ~60 ms to build, ~3 MB of BPF maps) would cost more than everything
                // it would unwind, a few samples per window of the agent's own work, whose cost
                // the agent reports itself.
                if ev.tgid == std::process::id() {
                    continue;
                }
                // A dropped target is never walked: building its tables would be wasted work.
                if let (Some(info), Some(unwinder), true) = (info, unwinder, kept) {
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
    // After the captures above, so a process's first code objects find its interpreter (the ring
    // may hold them before the process's first-sample event, sent from another CPU).
    for event in &uncaptured {
        table.announced(event);
    }
}
