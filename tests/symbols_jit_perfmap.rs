//! JIT code named from the runtime's perf map (`/tmp/perf-PID.map`, as Node's `--perf-basic-prof`,
//! perf-map-agent and Python's `-X perf` write it): the two generated functions get their names, their
//! mapping is `[jit]`, their 2:1 split survives, and an entry appended while sonde runs is read.

use crate::common;
use common::*;

#[test]
fn jit_frames_are_named_from_the_perf_map() {
    require_root();
    let bin = build_workload("jit_perfmap", "jit_perfmap", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("symbols_jit").join("profile.pb.gz");
    // The workload appends a third entry after 1 s; the recording ends after that.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = record_pid(pid, "4", &[], &out);
    drop(workload);
    eprintln!("{summary}");

    let profile = read_pprof(&out);
    let samples = resolve(&profile);
    let hot = inclusive(&samples, pid, "jit_hot", 0) as f64;
    let cold = inclusive(&samples, pid, "jit_cold", 0) as f64;
    let all = total(&samples, pid, 0) as f64;
    assert!(all > 200.0, "only {all} samples\n{summary}");
    assert!(
        (hot + cold) / all > 0.95,
        "JIT frames named in {hot}+{cold} of {all} samples\n{summary}"
    );
    // The hot share is binomial around 2/3 over the named samples: within 3 standard deviations (at
    // 400 samples, 2.4 points each) and a point of timer slack, so only a wrong split fails, not luck.
    let share = hot / (hot + cold);
    let sigma = (2.0 / 9.0 / (hot + cold)).sqrt();
    assert!(
        (share - 2.0 / 3.0).abs() <= 3.0 * sigma + 0.01,
        "jit_hot has {:.1}% of the JIT samples (jit_hot:jit_cold {:.2}), truly 66.7% (2:1), allowed ±{:.1} points\n{summary}",
        100.0 * share,
        hot / cold,
        100.0 * (3.0 * sigma + 0.01)
    );
    // Under the JIT frames, the caller that is a real function of the binary.
    assert!(
        samples.iter().filter(|s| s.pid == i64::from(pid)).any(|s| s
            .functions
            .windows(2)
            .any(|w| w[0] == "jit_hot" && w[1] == "call_jit")),
        "no stack has jit_hot called by call_jit"
    );
    // Their locations belong to the `[jit]` mapping.
    let s = |i: i64| profile.string_table[i as usize].as_str();
    let jit_function_ids: Vec<u64> = profile
        .function
        .iter()
        .filter(|f| s(f.name) == "jit_hot")
        .map(|f| f.id)
        .collect();
    let jit_location = profile
        .location
        .iter()
        .find(|l| {
            l.line
                .iter()
                .any(|line| jit_function_ids.contains(&line.function_id))
        })
        .expect("a location for jit_hot");
    let mapping = profile
        .mapping
        .iter()
        .find(|m| m.id == jit_location.mapping_id)
        .expect("jit_hot's mapping");
    assert_eq!(s(mapping.filename), "[jit]");
    // Read after it grew: the two first entries and the appended one.
    assert_eq!(
        summary_field(&summary, "perf_map_entries"),
        3.0,
        "{summary}"
    );
    assert_eq!(summary_field(&summary, "perf_map_bad_lines"), 0.0);
}
