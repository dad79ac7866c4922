//! Off-CPU Python stacks: `py_sleep.py` under Debian's `/usr/bin/python3` alternates
//! `time.sleep(0.02)` in `sleep_twenty` and `time.sleep(0.01)` in `sleep_ten`. Its off-CPU time
//! splits 2:1 between the two Python functions (±10%), which stand root-ward of the kernel's sleep
//! path in the same stacks.

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn python_sleeps_split_two_to_one_by_python_function() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_sleep.py", &["30"]);
    let pid = workload.pid();
    // Every episode tracked (budget 0), as this test is about which Python function an episode is
    // charged to, not about the sampling estimate: a sampled episode's weight stands for unseen
    // ones, unbiased but noisy (the offcpu_sampling tests judge the estimate).
    let (summary, samples) = record_python(
        pid,
        "4",
        &["--profile", "offcpu", "--offcpu-budget", "0"],
        "python_offcpu_sleep",
    );
    drop(workload);
    let ns = |f: &str| weight(samples.iter().filter(|s| s.has_python(f))) as f64;
    // Value 1: blocking episodes (estimated), for the mean sleep of each function.
    let events = |f: &str| -> i64 {
        samples
            .iter()
            .filter(|s| s.has_python(f))
            .map(|s| s.values[1])
            .sum()
    };
    let (twenty, ten, all) = (ns("sleep_twenty"), ns("sleep_ten"), weight(&samples) as f64);
    eprintln!(
        "sleep_twenty={:.0}ms in {} episodes, sleep_ten={:.0}ms in {} episodes, all={:.0}ms\n{}\n{summary}",
        twenty / 1e6,
        events("sleep_twenty"),
        ten / 1e6,
        events("sleep_ten"),
        all / 1e6,
        samples
            .iter()
            .take(3)
            .map(|s| s.describe())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The thread sleeps nearly all of the 4 s, and all of it in the two functions.
    common::assert_two_to_one(twenty, ten, 3.0e9);
    // Python callers above the kernel's sleep path in the same stacks.
    let kernel_under_python = samples.iter().any(|s| {
        let sleep = s.python_position("sleep_twenty");
        let kernel = s
            .frames
            .iter()
            .position(|f| f.is_kernel() && f.function.contains("nanosleep"));
        matches!((kernel, sleep), (Some(k), Some(p)) if k < p)
    });
    assert!(
        kernel_under_python,
        "no stack with the kernel's nanosleep frames under sleep_twenty"
    );
}
