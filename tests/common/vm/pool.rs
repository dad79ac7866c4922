//! The guests of a run booted ahead, as many at once as the host has CPUs, each test taking its own
//! guest when it is ready. The tests run one at a time (the host tests' CPU shares must be
//! undisturbed), and booted as each test came, the five guests took some 8 of CI's 40 minutes. Each
//! guest emulates its own CPUs, so booting two at once on two host CPUs only lengthens each one's
//! wall time, which no assertion reads.

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
}

/// What the pool's threads booted, by test; a failed boot is its panic's message.
type Booted = Vec<(&'static str, Result<Guest, String>)>;
static DONE: Mutex<Booted> = Mutex::new(Vec::new());
static READY: Condvar = Condvar::new();

/// The guest of `test`, one of `plan`. The first call starts booting every planned guest that the
/// run's test filter selects, in `plan`'s order (longest first); a guest the filter, as read here,
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
        let guest = boot_release(own.release, own.arch);
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

/// Boots `planned` on as many threads as the host has CPUs.
fn start(planned: Vec<&'static Planned>) {
    let lanes = std::thread::available_parallelism().map_or(1, |n| n.get());
    let queue = Arc::new(Mutex::new(VecDeque::from(planned)));
    for _ in 0..lanes {
        let queue = queue.clone();
        std::thread::spawn(move || {
            loop {
                // Its own statement: in a `while let`, the guard would hold the queue through the
                // boot.
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                let Some(next) = next else {
                    return;
                };
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    boot_release(next.release, next.arch)
                }))
                .map_err(|payload| {
                    payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "the boot panicked".to_owned())
                });
                DONE.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((next.test, result));
                READY.notify_all();
            }
        });
    }
}
