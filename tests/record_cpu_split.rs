//! `sonde record` on a workload with a known 50/30/20 split of CPU time between three named functions.

use crate::common;
use common::*;

#[test]
fn finds_the_three_functions_with_their_split_and_the_expected_sample_count() {
    require_root();
    let bin = build_workload("cpu_split", "cpu_split", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let dir = temp_dir("cpu_split");
    let out = dir.join("profile.pb.gz");
    let (folded, svg) = (dir.join("stacks.folded"), dir.join("flame.svg"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let cpu = CpuProbe::start(pid);
    let summary = record_pid(
        pid,
        "8",
        &[
            "--frequency",
            "99",
            "--folded",
            folded.to_str().unwrap(),
            "--flamegraph",
            svg.to_str().unwrap(),
        ],
        &out,
    );
    let cpu_used = cpu.in_window(&summary);
    drop(workload);

    let profile = read_pprof(&out);
    let samples = resolve(&profile);
    let all = assert_cpu_split(
        &samples,
        pid,
        &format!("cpu_used={cpu_used:.2}s\n{summary}"),
    );

    // One busy thread: expect CPU-seconds x 99 samples (= duration x 99 when the CPU is not contended).
    let expected = cpu_used * 99.0;
    assert!(
        (all - expected).abs() <= 0.25 * expected,
        "{all} samples, expected {expected:.0} ±25%"
    );
    assert!(
        cpu_used > 8.0 * 0.5,
        "the workload only got {cpu_used:.2} CPU-seconds in 8 s: machine overloaded"
    );
    assert_eq!(
        summary_field(&summary, "samples_cpu") as i64,
        all as i64,
        "summary disagrees with the profile"
    );
    assert!(
        summary_field(&summary, "symbolized_frame_ratio") > 0.9,
        "{summary}"
    );
    assert_eq!(summary_field(&summary, "lost_samples"), 0.0);
    // A native process with tables once captured: its samples are charged to that path.
    assert_sample_cost(&summary, "tables");

    // Folded stacks: root first, weighted lines that add up to the profile's samples.
    let folded = std::fs::read_to_string(&folded).unwrap();
    let folded_total: i64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    assert_eq!(folded_total, all as i64);
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("cpu_split;") && l.contains(";main;burn_fifty")),
        "{folded}"
    );
    // The flame graph is an SVG naming the functions.
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg") && svg.contains("burn_thirty"));
}
