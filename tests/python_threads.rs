//! Threads: `py_threads.py` runs two Python threads under Debian's `/usr/bin/python3`, named by their
//! kernel thread name (`comm`): `py-alpha` busy in `spin_alpha`, `py-beta` in `spin_beta`. Each thread's
//! samples carry its own function and never the other's: the kernel finds the sampled thread's own
//! Python thread state, not the one holding the GIL or the main thread's. The same under pyenv's 3.9
//! and 3.10, whose thread states carry no kernel thread id (the kernel takes the GIL holder's there).

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn each_thread_gets_its_own_function_never_the_other() {
    require_root();
    check_threads(&interpreter(DEBIAN_PYTHON));
}

#[test]
fn pyenv_3_10_threads_get_their_own_functions() {
    require_root();
    check_threads(&pyenv("3.10.13"));
}

#[test]
fn pyenv_3_9_threads_get_their_own_functions() {
    require_root();
    check_threads(&pyenv("3.9.18"));
}

fn check_threads(python: &std::path::Path) {
    let workload = start_script(python, "py_threads.py", &["30"]);
    let pid = workload.pid();
    let (summary, samples) = record_python(pid, "6", &["--frequency", "99"], "python_threads");
    drop(workload);
    for (comm, own, other) in [
        ("py-alpha", "spin_alpha", "spin_beta"),
        ("py-beta", "spin_beta", "spin_alpha"),
    ] {
        let mine: Vec<&PySample> = samples.iter().filter(|s| s.comm == comm).collect();
        let total = weight(mine.iter().copied());
        let with_own = weight(mine.iter().copied().filter(|s| s.has_python(own)));
        let wrong: Vec<String> = mine
            .iter()
            .filter(|s| s.has_python(other))
            .take(10)
            .map(|s| s.describe())
            .collect();
        eprintln!("{comm}: {total} samples, {with_own} in {own}");
        // Two threads share the GIL: each runs about half the time.
        assert!(
            total > 100,
            "only {total} samples of thread {comm} in 6 s\n{summary}"
        );
        assert!(
            wrong.is_empty(),
            "samples of thread {comm} carry the other thread's {other}:\n{}",
            wrong.join("\n")
        );
        let missing: Vec<String> = mine
            .iter()
            .filter(|s| !s.has_python(own))
            .take(10)
            .map(|s| s.describe())
            .collect();
        assert!(
            with_own as f64 >= 0.95 * total as f64,
            "only {with_own} of {total} samples of {comm} are in {own}; some that are not:\n{}",
            missing.join("\n")
        );
    }
}
