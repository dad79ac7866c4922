//! A recursion 100 deep in a build without frame pointers: the stacks of the samples taken at the
//! bottom have at least 100 frames and still reach the thread root.

use crate::common;
use common::*;

#[test]
fn a_recursion_100_deep_gives_100_frames() {
    require_root();
    let bin = build_workload("recursion", "recursion_nofp", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["30", "100"]);
    let pid = workload.pid();
    let out = temp_dir("unwind_recursion").join("profile.pb.gz");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = record_pid(pid, "5", &[], &out);
    let samples = resolve(&read_pprof(&out));
    let bottom: Vec<&Resolved> = samples
        .iter()
        .filter(|s| s.pid == i64::from(pid) && s.functions.iter().any(|f| f == "burn_at_bottom"))
        .collect();
    let weight: i64 = bottom.iter().map(|s| s.values[0]).sum();
    let deep: i64 = bottom
        .iter()
        .filter(|s| s.functions.iter().filter(|f| *f == "recurse").count() >= 100)
        .filter(|s| s.functions.iter().any(|f| f == "main"))
        .map(|s| s.values[0])
        .sum();
    let longest = bottom.iter().map(|s| s.functions.len()).max().unwrap_or(0);
    eprintln!(
        "bottom samples={weight} with 100 recurse frames and main={deep} longest={longest}\n{summary}"
    );
    assert!(
        weight > 100,
        "only {weight} samples at the bottom of the recursion"
    );
    assert!(
        deep as f64 >= 0.95 * weight as f64,
        "{deep} of {weight} bottom samples have 100 recurse frames under main"
    );
    assert!(longest >= 100, "longest stack has {longest} frames");
    assert!(
        summary_field(&summary, "frames_per_stack") >= 100.0,
        "{summary}"
    );
}
