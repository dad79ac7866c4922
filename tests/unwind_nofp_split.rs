//! Without frame pointers, `.eh_frame` unwinding keeps the 50/30/20 split of `cpu_split` and complete
//! stacks: at least 95% of the samples reach `main`, and the burn functions sit under `main` in the
//! folded output. The same binary walked by frame pointers only (`--unwind fp`) does not reach `main`,
//! which shows the tables did the work.

use crate::common;
use common::*;

#[test]
fn split_and_complete_stacks_without_frame_pointers() {
    require_root();
    let bin = build_workload("cpu_split", "cpu_split_nofp", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["40"]);
    let pid = workload.pid();
    let dir = temp_dir("unwind_nofp_split");
    let (out, folded) = (dir.join("tables.pb.gz"), dir.join("tables.folded"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = record_pid(pid, "8", &["--folded", folded.to_str().unwrap()], &out);
    let samples = resolve(&read_pprof(&out));
    let to_main = share_reaching(&samples, pid, "", "main", 0);
    assert_cpu_split(
        &samples,
        pid,
        &format!("reaching main={to_main:.3}\n{summary}"),
    );
    assert!(
        to_main >= 0.95,
        "only {to_main:.3} of the samples reach main"
    );
    assert!(
        summary_field(&summary, "walk_root_ratio") >= 0.95,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "unwind_tables_built") >= 2.0,
        "{summary}"
    );

    let folded = std::fs::read_to_string(&folded).unwrap();
    for burn in ["burn_fifty", "burn_thirty", "burn_twenty"] {
        assert!(
            folded
                .lines()
                .any(|l| l.contains(&format!(";__libc_start_call_main;main;{burn}"))),
            "{burn} not under main:\n{folded}"
        );
    }

    // Frame pointers alone cannot walk this build.
    let fp_out = dir.join("fp.pb.gz");
    let fp_summary = record_pid(pid, "3", &["--unwind", "fp"], &fp_out);
    let fp_samples = resolve(&read_pprof(&fp_out));
    let fp_to_main = share_reaching(&fp_samples, pid, "", "main", 0);
    eprintln!("frame pointers only: reaching main={fp_to_main:.3}\n{fp_summary}");
    assert!(
        fp_to_main < 0.5,
        "frame pointers alone reached main in {fp_to_main:.3} of the samples: the test binary keeps frame pointers"
    );
}
