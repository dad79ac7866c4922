//! A recursion 400 deep in a build without frame pointers (past perf's 127 frames, as javac's and
//! the TypeScript compiler's recursions are): the stacks of the samples taken at the bottom have all
//! 400 frames and still reach the thread root.

use crate::common;
use common::*;

#[test]
fn a_recursion_400_deep_gives_400_frames_and_its_root() {
    require_root();
    let bin = build_workload("recursion", "recursion_nofp", NOFP_FLAGS);
    let workload = Workload::start(&bin, &["30", "400"]);
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
        .filter(|s| s.functions.iter().filter(|f| *f == "recurse").count() >= 400)
        .filter(|s| s.functions.iter().any(|f| f == "main"))
        .map(|s| s.values[0])
        .sum();
    let longest = bottom.iter().map(|s| s.functions.len()).max().unwrap_or(0);
    eprintln!(
        "bottom samples={weight} with 400 recurse frames and main={deep} longest={longest}\n{summary}"
    );
    assert!(
        weight > 100,
        "only {weight} samples at the bottom of the recursion"
    );
    assert!(
        deep as f64 >= 0.95 * weight as f64,
        "{deep} of {weight} bottom samples have 400 recurse frames under main"
    );
    assert!(longest >= 400, "longest stack has {longest} frames");
    assert!(
        summary_field(&summary, "frames_per_stack") >= 400.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "walk_root_ratio") >= 0.95,
        "walks of 400 frames cut before the root\n{summary}"
    );
}
