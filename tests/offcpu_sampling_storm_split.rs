//! Off-CPU sampling under a context-switch storm keeps what matters: with the default budget, a pipe
//! ping-pong storm beside them, the 20 ms and 10 ms sleeps still split 2:1 within ±10% (they are long,
//! so after the first tracked one each is tracked for sure), and a lock wait still totals 0.75-1.1x
//! the time the lock was held.

use crate::common;
use common::*;

#[test]
fn sleeps_split_two_to_one_beside_a_storm() {
    require_root();
    let sleeper = build_workload("offcpu_sleep", "offcpu_sleep", FP_FLAGS);
    let storm = build_workload("pipe_storm", "pipe_storm", FP_FLAGS);
    let s = Workload::start(&sleeper, &["30"]);
    let st = Workload::start(&storm, &["30"]);
    let out = temp_dir("offcpu_storm_split").join("offcpu.pb.gz");
    let storm_pid = st.pid().to_string();
    // 12 s, not 4: before the controller's first step (10 ms) every episode is drawn 1 in 32, and a
    // 20 ms sleep drawn then weighs 640 ms. The estimate stays unbiased, but one such draw moved a 4 s
    // split by 0.46; over 12 s it moves it by less than the tolerance.
    let summary = record_pid(
        s.pid(),
        "12",
        &["--profile", "offcpu", "--pid", &storm_pid],
        &out,
    );
    let samples = resolve(&read_pprof(&out));
    assert_sleep_split(&samples, s.pid(), &summary);
    assert!(
        summary_field(&summary, "offcpu_one_in_max") > 1.0,
        "the storm was not sampled:\n{summary}"
    );
}

#[test]
fn lock_wait_matches_the_hold_time_beside_a_storm() {
    require_root();
    let bin = build_workload("offcpu_mutex", "offcpu_mutex", FP_FLAGS);
    let storm = build_workload("pipe_storm", "pipe_storm", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let st = Workload::start(&storm, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("offcpu_storm_mutex").join("offcpu.pb.gz");
    let storm_pid = st.pid().to_string();
    let summary = record_pid(
        pid,
        "4",
        &["--profile", "offcpu", "--pid", &storm_pid],
        &out,
    );
    let samples = resolve(&read_pprof(&out));
    let wait = inclusive(&samples, pid, "wait_for_lock", 0) as f64;
    let held = inclusive(&samples, pid, "hold_lock", 0) as f64;
    eprintln!(
        "wait_for_lock={:.0}ms hold_lock={:.0}ms\n{summary}",
        wait / 1e6,
        held / 1e6
    );
    let ratio = wait / held;
    assert!(
        (0.75..=1.1).contains(&ratio),
        "lock wait {:.2} s vs held {:.2} s (ratio {ratio:.2})",
        wait / 1e9,
        held / 1e9
    );
    assert!(
        summary_field(&summary, "offcpu_one_in_max") > 1.0,
        "the storm was not sampled:\n{summary}"
    );
}
