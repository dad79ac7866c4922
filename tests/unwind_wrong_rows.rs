//! A walk that meets a wrong return address ends as a counted cut, never in a made-up frame.
//! `wrong_return.c` replaces its own return address with a heap address (mapped, not executable)
//! while it burns CPU, as a row for another address or a stack changed under the walk would make the
//! walk read. The kernel finds that address in no executable mapping and ends the walk there
//! (`walk_bad_frame`): no frame outside the process's mappings, and no caller made up from it,
//! reaches the profile. Frames in the burner itself are still there, named.

use crate::common;
use common::*;

#[test]
fn a_return_address_in_no_executable_mapping_is_cut_and_counted() {
    require_root();
    let bin = build_workload("wrong_return", "wrong_return", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("unwind_wrong_rows").join("profile.pb.gz");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = record_pid(pid, "4", &[], &out);
    drop(workload);
    let samples = resolve(&read_pprof(&out));
    let mine: Vec<&Resolved> = samples.iter().filter(|s| s.pid == i64::from(pid)).collect();
    let all: i64 = mine.iter().map(|s| s.values[0]).sum();
    let in_burner: i64 = mine
        .iter()
        .filter(|s| s.user().contains(&"burn_with_wrong_return"))
        .map(|s| s.values[0])
        .sum();
    let walks = summary_field(&summary, "walks");
    let bad = summary_field(&summary, "walk_bad_frame");
    eprintln!(
        "{in_burner} of {all} samples in the burner; {bad} of {walks} walks cut at a bad frame\n{summary}"
    );
    assert!(
        in_burner >= 200,
        "{in_burner} samples in the burner\n{summary}"
    );
    assert!(
        bad >= 0.9 * in_burner as f64,
        "{bad} walks cut at a bad frame for {in_burner} samples in the burner\n{summary}"
    );
    assert_eq!(
        summary_field(&summary, "unmapped_outside_mappings"),
        0.0,
        "a made-up frame outside the process's mappings reached the profile\n{summary}"
    );
    // The burner is the outermost frame of its samples: nothing made up below it.
    let below: i64 = mine
        .iter()
        .filter(|s| {
            let user = s.user();
            user.iter()
                .position(|f| *f == "burn_with_wrong_return")
                .is_some_and(|at| at + 1 < user.len())
        })
        .map(|s| s.values[0])
        .sum();
    assert!(
        below as f64 <= 0.05 * in_burner as f64,
        "{below} of {in_burner} samples hold a frame below the burner"
    );
}
