//! The guests of a run booted ahead, side by side while their host threads fit the host's CPUs,
//! each test taking its own guest when it is ready. The tests run one at a time (the host tests'
//! CPU shares must be undisturbed), and booted as each test came, the five guests took 426 s. An
//! x86_64 guest keeps one host thread busy, so two boot at once on two CPUs; an arm64 guest keeps
//! two (a thread per vCPU), so it boots alone: a guest whose threads wait for a CPU mid-round
//! shifts its timed splits (`Arch::host_threads`).

use std::{
    collections::VecDeque,
    panic::AssertUnwindSafe,
    sync::{Arc, Condvar, Mutex, Once},
};

use super::{Arch, Guest, boot_release};

/// A guest the suite boots, and the test that checks it.
pub struct Planned {
    /// The test function's name (`debian_12_6_1_arm64`).
    pub test: &'static str,
    pub release: &'static str,
    pub arch: Arch,
    /// Whether the guest runs the Python scenario (another architecture than the host's only).
    pub python: bool,
}

/// What the pool's threads booted, by test; a failed boot is its panic's message.
type Booted = Vec<(&'static str, Result<Guest, String>)>;
static DONE: Mutex<Booted> = Mutex::new(Vec::new());
static READY: Condvar = Condvar::new();

/// The guest of `test`, one of `plan`. The first call starts booting every planned guest that the
/// run's test filter selects, in `plan`'s order; a guest the filter, as read here,
/// did not select is booted by its test.
pub fn guest(plan: &'static [Planned], test: &str) -> Guest {
    static START: Once = Once::new();
    let selected: Vec<&'static Planned> = plan
        .iter()
        .filter(|p| super::filter::selects(&format!("vm_kernels::{}", p.test)))
        .collect();
    let Some(own) = selected.iter().find(|p| p.test == test) else {
        let own = plan
            .iter()
            .find(|p| p.test == test)
            .unwrap_or_else(|| panic!("{test} is not among the planned guests"));
        let guest = boot_release(own);
        guest.print_log();
        return guest;
    };
    START.call_once(|| start(selected.clone()));
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(at) = done.iter().position(|(t, _)| *t == own.test) {
            let guest = done
                .swap_remove(at)
                .1
                .unwrap_or_else(|message| panic!("{message}"));
            guest.print_log();
            return guest;
        }
        done = READY.wait(done).unwrap_or_else(|e| e.into_inner());
    }
}

/// What the pool's threads share: the guests not started yet, and the host threads the running
/// ones keep busy.
struct Lanes {
    queue: VecDeque<&'static Planned>,
    busy: usize,
}

/// Boots `planned` side by side while their host threads (`Arch::host_threads`) fit the host's
/// CPUs; a guest that needs them all boots alone.
fn start(planned: Vec<&'static Planned>) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lanes = Arc::new((
        Mutex::new(Lanes {
            queue: VecDeque::from(planned),
            busy: 0,
        }),
        Condvar::new(),
    ));
    for _ in 0..cpus {
        let lanes = lanes.clone();
        std::thread::spawn(move || {
            let (state, freed) = &*lanes;
            loop {
                let next = {
                    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                    loop {
                        if s.queue.is_empty() {
                            return;
                        }
                        let fits =
                            |p: &&Planned| s.busy == 0 || s.busy + p.arch.host_threads() <= cpus;
                        if let Some(at) = s.queue.iter().position(fits) {
                            let next = s.queue.remove(at).expect("a queued guest");
                            s.busy += next.arch.host_threads();
                            break next;
                        }
                        s = freed.wait(s).unwrap_or_else(|e| e.into_inner());
                    }
                };
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| boot_release(next)))
                    .map_err(|payload| {
                        payload
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "the boot panicked".to_owned())
                    });
                state.lock().unwrap_or_else(|e| e.into_inner()).busy -= next.arch.host_threads();
                freed.notify_all();
                DONE.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((next.test, result));
                READY.notify_all();
            }
        });
    }
}
