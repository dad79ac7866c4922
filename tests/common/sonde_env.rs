//! What the `sonde` processes a test starts get in their environment beyond the helpers' own: the
//! test hook that loads the legacy kernel programs, for the tests that run those.

thread_local! {
    /// Variables every `sonde` the current test starts gets (see [`with_legacy_programs`]).
    static SONDE_ENV: std::cell::RefCell<Vec<(&'static str, &'static str)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `check` with every `sonde` it starts loading the legacy kernel programs (those of Linux 5.10
/// to 6.0, picked on any kernel by the agent's test hook `SONDE_TEST_LEGACY_PROGRAMS`).
pub fn with_legacy_programs<T>(check: impl FnOnce() -> T) -> T {
    SONDE_ENV.with(|env| env.borrow_mut().push(("SONDE_TEST_LEGACY_PROGRAMS", "1")));
    let result = check();
    SONDE_ENV.with(|env| env.borrow_mut().clear());
    result
}

/// The variables of [`with_legacy_programs`], for a `sonde` command.
pub(super) fn sonde_env() -> Vec<(&'static str, &'static str)> {
    SONDE_ENV.with(|env| env.borrow().clone())
}
