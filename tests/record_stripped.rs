//! A stripped binary without frame pointers: its frames are unknown (module+address) and counted, its
//! samples are not dropped, and its stacks are still complete: `strip` keeps `.eh_frame`, so the
//! unwind tables walk it to the thread root (the kernel's verdict: names cannot say it here). Walked by
//! frame pointers only, the same stacks are truncated, and counted as such.

use crate::common;
use common::*;

#[test]
fn stripped_binary_without_frame_pointers_is_counted_not_dropped() {
    require_root();
    let bin = build_workload(
        "cpu_split",
        "cpu_split_stripped",
        &["-O2", "-fomit-frame-pointer", "-s"],
    );
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let out = temp_dir("stripped").join("profile.pb.gz");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let cpu = CpuProbe::start(pid);
    let summary = record_pid(pid, "4", &[], &out);
    let cpu_used = cpu.in_window(&summary);
    drop(workload);

    let profile = read_pprof(&out);
    let samples = resolve(&profile);
    let all = total(&samples, pid, 0) as f64;
    eprintln!("{all} samples, {cpu_used:.2} CPU-s\n{summary}");
    // Not dropped: every sample is there.
    assert!(
        (all - cpu_used * 99.0).abs() <= 0.25 * cpu_used * 99.0,
        "{all} samples for {cpu_used:.2} CPU-s"
    );
    // No burn_* names (stripped), but unknown frames with their module and address.
    assert_eq!(inclusive(&samples, pid, "burn_fifty", 0), 0);
    let unknown_in_binary = profile.location.iter().any(|l| {
        l.line.is_empty()
            && l.address != 0
            && profile.mapping.iter().any(|m| {
                m.id == l.mapping_id
                    && profile.string_table[m.filename as usize].ends_with("cpu_split_stripped")
            })
    });
    assert!(
        unknown_in_binary,
        "unknown frames must keep their mapping and address"
    );
    // Counted.
    assert!(
        summary_field(&summary, "symbolized_frame_ratio") < 1.0,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "truncated_stack_ratio") < 0.05,
        "{summary}"
    );
    assert!(
        summary_field(&summary, "walk_root_ratio") > 0.95,
        "{summary}"
    );

    let workload = Workload::start(&bin, &["30"]);
    let fp_summary = record_pid(workload.pid(), "2", &["--unwind", "fp"], &out);
    assert!(
        summary_field(&fp_summary, "truncated_stack_ratio") > 0.5,
        "{fp_summary}"
    );
}
