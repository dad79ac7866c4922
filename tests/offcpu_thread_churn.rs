//! Off-CPU: thousands of threads that start, sleep and exit do not leave remembered state behind.
//! Every episode is tracked (`--offcpu-budget 0`), so each thread leaves state to be cleaned.

use crate::common;
use common::*;

#[test]
fn remembered_state_does_not_grow_with_exited_threads() {
    require_root();
    let bin = build_workload("thread_churn", "thread_churn", FP_FLAGS);
    let out = temp_dir("churn").join("offcpu.pb.gz");
    let sonde = std::thread::spawn({
        let out = out.clone();
        move || {
            sonde_ok(&[
                "record",
                "--profile",
                "offcpu",
                "--offcpu-budget",
                "0",
                "--duration",
                "5",
                "--output",
                out.to_str().unwrap(),
                "--summary-json",
                "-",
            ])
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let mut child = spawn(&bin, &["3000"]);
    assert!(child.wait().unwrap().success());
    let summary = sonde.join().unwrap();
    eprintln!("{summary}");
    let pending = summary_field(&summary, "offcpu_pending");
    let episodes = summary_field(&summary, "offcpu_episodes");
    // 3000 threads each blocked at least once; what stays remembered is only what is blocked right now.
    assert!(
        episodes >= 3000.0,
        "expected at least 3000 episodes, got {episodes}"
    );
    assert!(
        pending < 500.0,
        "{pending} threads still remembered after 3000 exited: state leaks"
    );
    // The counters exist and are reported (unmatched exits are counted, not silent).
    summary_field(&summary, "offcpu_unmatched_exit");
}
