//! CPU burnt in a signal handler, without frame pointers: the walk crosses glibc's signal trampoline
//! (`__restore_rt`, a row of its own in the table) back into the interrupted function and on to
//! `main`.

use crate::common;
use common::*;

#[test]
fn handler_stacks_continue_through_the_signal_trampoline() {
    require_root();
    let bin = build_workload("signal_burn", "signal_burn_nofp", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("unwind_signal").join("profile.pb.gz");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = record_pid(pid, "5", &[], &out);
    let samples = resolve(&read_pprof(&out));
    let in_handler = inclusive(&samples, pid, "handler_burn", 0);
    let through = share_reaching(&samples, pid, "handler_burn", "main_work", 0);
    let to_main = share_reaching(&samples, pid, "handler_burn", "main", 0);
    eprintln!(
        "handler samples={in_handler} through main_work={through:.3} to main={to_main:.3}\n{summary}"
    );
    assert!(in_handler > 50, "only {in_handler} samples in the handler");
    assert!(
        through >= 0.9,
        "only {through:.3} of the handler's samples continue into the interrupted main_work"
    );
    assert!(
        to_main >= 0.9,
        "only {to_main:.3} of the handler's samples reach main"
    );
    // The order is the handler's, then the trampoline's, then the interrupted code's.
    let ordered = samples.iter().any(|s| {
        let pos = |name: &str| s.functions.iter().position(|f| f == name);
        matches!(
            (pos("on_signal"), pos("__restore_rt"), pos("main_work")),
            (Some(a), Some(b), Some(c)) if a < b && b < c
        )
    });
    assert!(
        ordered,
        "no stack has on_signal -> __restore_rt -> main_work"
    );
}
