//! Off-CPU: a thread blocked on a mutex held by another shows the lock-wait function with about the
//! time the lock was held.

use crate::common;
use common::*;

#[test]
fn lock_wait_matches_the_hold_time() {
    require_root();
    let bin = build_workload("offcpu_mutex", "offcpu_mutex", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("offcpu_mutex").join("offcpu.pb.gz");
    let summary = record_pid(pid, "4", &["--profile", "offcpu"], &out);
    drop(workload);
    let samples = resolve(&read_pprof(&out));
    let wait = inclusive(&samples, pid, "wait_for_lock", 0) as f64;
    let held = inclusive(&samples, pid, "hold_lock", 0) as f64;
    eprintln!(
        "wait_for_lock={:.0}ms hold_lock={:.0}ms\n{summary}",
        wait / 1e6,
        held / 1e6
    );
    assert!(
        held > 2.0e9,
        "the holder sleeps 40 of every 50 ms: expected > 2 s in hold_lock, got {:.2}",
        held / 1e9
    );
    let ratio = wait / held;
    assert!(
        (0.75..=1.1).contains(&ratio),
        "lock wait {:.2} s vs held {:.2} s (ratio {ratio:.2})",
        wait / 1e9,
        held / 1e9
    );
    let futex = samples.iter().any(|x| {
        x.functions.iter().any(|f| f == "wait_for_lock")
            && x.functions
                .iter()
                .zip(&x.kernel)
                .any(|(f, k)| *k && f.contains("futex"))
    });
    assert!(futex, "the lock wait should show the kernel futex path");
}
