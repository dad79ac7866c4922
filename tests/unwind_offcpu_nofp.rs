//! Off-CPU stacks use the same unwinder, from the registers the task saved when it entered the kernel:
//! on a build without frame pointers, the 20/10 ms sleeps still split 2:1 and the sleeping functions
//! sit under `main`. Every episode is walked (`--offcpu-budget 0`): this test is about the unwinder, and
//! sampling's own accuracy is the subject of the offcpu_sampling_* tests (a first long block drawn at a
//! startup 1-in-N weighs N times in a 4 s recording, which made this split read 2.46 once).

use crate::common;
use common::*;

#[test]
fn sleeps_split_two_to_one_without_frame_pointers() {
    require_root();
    let sleeper = build_workload("offcpu_sleep", "offcpu_sleep_nofp", NOFP_FLAGS);
    let workload = Workload::start(&sleeper, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("unwind_offcpu").join("offcpu.pb.gz");
    let summary = record_pid(
        pid,
        "4",
        &["--profile", "offcpu", "--offcpu-budget", "0"],
        &out,
    );
    let samples = resolve(&read_pprof(&out));
    let to_main = share_reaching(&samples, pid, "", "main", 0);
    assert_sleep_split(
        &samples,
        pid,
        &format!("reaching main={to_main:.3}\n{summary}"),
    );
    assert!(
        to_main >= 0.95,
        "only {to_main:.3} of the off-CPU time reaches main"
    );
    // The libc frame (clock_nanosleep) between the kernel and do_sleep is walked, not skipped.
    let through_libc = samples.iter().any(|s| {
        s.pid == i64::from(pid)
            && s.functions
                .windows(2)
                .any(|w| w[0].contains("nanosleep") && w[1] == "do_sleep")
    });
    assert!(
        through_libc,
        "no stack has libc's nanosleep directly under do_sleep"
    );
}
