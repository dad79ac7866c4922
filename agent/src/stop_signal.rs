//! SIGINT/SIGTERM as a flag, so a fixed-duration recording can be ended early and still write its output.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to the flag.
pub(crate) fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Sleeps for `duration` or until a stop signal; returns true when stopped by a signal.
pub(crate) fn sleep(duration: Duration) -> bool {
    let end = Instant::now() + duration;
    while !STOP.load(Ordering::SeqCst) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
    true
}
