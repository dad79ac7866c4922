//! Code without unwind information (here JIT-like code in anonymous executable memory that keeps a
//! frame pointer) is crossed by the frame-pointer step: the stacks through it reach `main`, and the
//! fallback is counted.

use crate::common;
use common::*;

#[test]
fn frames_through_anonymous_code_are_recovered_by_frame_pointer() {
    require_root();
    let bin = build_workload("jit_frame", "jit_frame_nofp", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("unwind_jit").join("profile.pb.gz");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = record_pid(pid, "5", &[], &out);
    let samples = resolve(&read_pprof(&out));
    let to_main = share_reaching(&samples, pid, "jit_callee", "main", 0);
    // jit_callee, one unsymbolized frame (the anonymous code), then call_through_jit.
    let shaped = samples.iter().any(|s| {
        s.pid == i64::from(pid)
            && s.functions
                .windows(3)
                .any(|w| w[0] == "jit_callee" && w[1] == "?" && w[2] == "call_through_jit")
    });
    eprintln!("reaching main={to_main:.3}\n{summary}");
    assert!(
        to_main >= 0.9,
        "only {to_main:.3} of jit_callee's samples reach main"
    );
    assert!(
        shaped,
        "no stack has jit_callee -> anonymous code -> call_through_jit"
    );
    assert!(
        summary_field(&summary, "fallback_no_info") > 0.0,
        "the frame-pointer fallback was not counted:\n{summary}"
    );
}
