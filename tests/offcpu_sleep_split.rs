//! Off-CPU: a thread alternating 20 ms and 10 ms sleeps in two named functions splits 2:1, with the
//! kernel sleep path under it; a busy loop has (nearly) no voluntary off-CPU time.

use crate::common;
use common::*;

#[test]
fn sleeps_split_two_to_one_with_the_kernel_sleep_path() {
    require_root();
    let sleeper = build_workload("offcpu_sleep", "offcpu_sleep", FP_FLAGS);
    let busy = build_workload("cpu_split", "cpu_split_busy", FP_FLAGS);
    let mut s = spawn(&sleeper, &["30"]);
    let mut b = spawn(&busy, &["30"]);
    let out = temp_dir("offcpu_sleep").join("offcpu.pb.gz");
    let summary = sonde_ok(&[
        "record",
        "--profile",
        "offcpu",
        "--duration",
        "4",
        "--pid",
        &s.id().to_string(),
        "--pid",
        &b.id().to_string(),
        "--output",
        out.to_str().unwrap(),
    ]);
    for c in [&mut s, &mut b] {
        c.kill().unwrap();
        let _ = c.wait();
    }
    let profile = read_pprof(&out);
    let types: Vec<_> = profile
        .sample_type
        .iter()
        .map(|t| {
            (
                profile.string_table[t.r#type as usize].as_str(),
                profile.string_table[t.unit as usize].as_str(),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("offcpu", "nanoseconds"),
            ("events", "count"),
            ("tracked", "count")
        ]
    );
    let samples = resolve(&profile);
    assert_sleep_split(&samples, s.id(), &summary);
    let kernel_sleep = samples.iter().any(|x| {
        x.pid == i64::from(s.id())
            && x.functions
                .iter()
                .zip(&x.kernel)
                .any(|(f, k)| *k && f.contains("nanosleep"))
    });
    assert!(
        kernel_sleep,
        "no kernel nanosleep frames under the sleeping functions"
    );
    // The busy loop never blocks voluntarily.
    let busy_ns = total(&samples, b.id(), 0) as f64;
    assert!(
        busy_ns < 0.02 * 4e9,
        "busy loop shows {:.3} s of voluntary off-CPU time",
        busy_ns / 1e9
    );
}
