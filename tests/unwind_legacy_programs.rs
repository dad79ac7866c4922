//! The legacy kernel programs (those Linux 5.10 to 6.0 load, see the README's "Kernels") on this
//! machine's kernel, picked by the agent's test hook: the same profiles as the full programs. A C
//! program without frame pointers splits 50/30/20 and reaches `main` by tables; its frame-pointer
//! build does by frame pointers; Debian's python3 splits by Python function; a sleeper's off-CPU
//! time splits 2:1 with its user frames (read at the top of the task's kernel stack, not by
//! `bpf_task_pt_regs`). The VM test runs the same programs on Debian's own 5.10.

use crate::common;
use common::{sonde_env::with_legacy_programs, *};

/// `sonde record` of `pid` with the legacy programs; asserts the summary says they were loaded.
fn record_legacy(pid: u32, seconds: &str, extra: &[&str], out: &std::path::Path) -> String {
    let summary = with_legacy_programs(|| record_pid(pid, seconds, extra, out));
    let json: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let loaded = &json["figures"]["kernel_programs"];
    let legacy = loaded
        .as_object()
        .is_some_and(|m| m.iter().any(|(k, v)| k.starts_with("legacy/") && v == 1.0));
    assert!(legacy, "the legacy programs were not loaded: {loaded}");
    summary
}

#[test]
fn the_legacy_programs_split_and_root_c_programs_by_tables_and_by_frame_pointers() {
    require_root();
    let dir = temp_dir("unwind_legacy_programs");
    for (flags, unwind, name) in [
        (NOFP_FLAGS, "auto", "legacy_nofp"),
        (FP_FLAGS, "fp", "legacy_fp"),
    ] {
        let bin = build_workload("cpu_split", name, flags);
        let workload = Workload::start(&bin, &["30"]);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let out = dir.join(format!("{name}.pb.gz"));
        let summary = record_legacy(workload.pid(), "6", &["--unwind", unwind], &out);
        let samples = resolve(&read_pprof(&out));
        let to_main = share_reaching(&samples, workload.pid(), "", "main", 0);
        let context = format!("{name}: reaching main={to_main:.3}\n{summary}");
        assert_cpu_split(&samples, workload.pid(), &context);
        assert!(to_main >= 0.95, "{context}");
    }
}

#[test]
fn the_legacy_programs_name_python_frames() {
    require_root();
    with_legacy_programs(|| {
        python::check_function_split(
            &python::interpreter(python::DEBIAN_PYTHON),
            "legacy_python_split",
        )
    });
}

#[test]
fn the_legacy_programs_split_off_cpu_time_with_user_frames() {
    require_root();
    let sleeper = build_workload("offcpu_sleep", "legacy_offcpu_sleep", FP_FLAGS);
    let workload = Workload::start(&sleeper, &["30"]);
    let out = temp_dir("unwind_legacy_programs").join("offcpu.pb.gz");
    let summary = record_legacy(workload.pid(), "4", &["--profile", "offcpu"], &out);
    let samples = resolve(&read_pprof(&out));
    assert_sleep_split(&samples, workload.pid(), &summary);
    let to_main = share_reaching(&samples, workload.pid(), "", "main", 0);
    assert!(to_main >= 0.95, "reaching main={to_main:.3}\n{summary}");
}
