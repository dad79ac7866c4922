//! A syscall-heavy workload shows kernel frames under (leafward of) its user frames.

use crate::common;
use common::*;

#[test]
fn kernel_frames_sit_under_the_user_frames_that_made_the_syscall() {
    require_root();
    let bin = build_workload("syscall_heavy", "syscall_heavy", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("syscall").join("profile.pb.gz");
    record_pid(pid, "4", &[], &out);
    drop(workload);

    let samples = resolve(&read_pprof(&out));
    let mine: Vec<_> = samples.iter().filter(|s| s.pid == i64::from(pid)).collect();
    let with_both = mine
        .iter()
        .filter(|s| {
            let first_user = s.kernel.iter().position(|k| !k);
            // Leaf first: every kernel frame comes before the first user frame, and read_zeros is a user frame.
            first_user.is_some_and(|u| {
                u > 0 && s.kernel[..u].iter().all(|k| *k) && s.kernel[u..].iter().all(|k| !k)
            }) && s.functions.iter().any(|f| f == "read_zeros")
        })
        .map(|s| s.values[0])
        .sum::<i64>();
    let all: i64 = mine.iter().map(|s| s.values[0]).sum();
    let syscall_path = mine.iter().any(|s| {
        s.functions
            .iter()
            .zip(&s.kernel)
            .any(|(f, k)| *k && (f.contains("sys_read") || f.contains("read_zero")))
    });
    eprintln!("{with_both} of {all} samples have kernel frames under read_zeros");
    assert!(all > 0, "no samples for the workload");
    assert!(
        with_both as f64 > 0.5 * all as f64,
        "most samples should be in the kernel under read_zeros"
    );
    assert!(
        syscall_path,
        "no kernel read path (sys_read/read_zero) among kernel frames"
    );
}
