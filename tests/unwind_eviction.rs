//! Unwind tables stay within `--max-unwind-table-mib`: with 1 MiB (32 blocks of rows) and 40 processes
//! of distinct binaries (each needing a table of its own, plus libc's), tables are evicted, the
//! evictions are counted, and the recording completes with a valid profile.

use crate::common;
use common::*;

#[test]
fn a_tiny_budget_evicts_tables_and_counts_it() {
    require_root();
    let workloads: Vec<Workload> = (0..40)
        .map(|id| {
            let define = format!("-DID={id}");
            let mut flags = NOFP_FLAGS.to_vec();
            flags.push(&define);
            let bin = build_workload("many_binaries", &format!("many_binaries_{id}"), &flags);
            Workload::start(&bin, &["40"])
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = temp_dir("unwind_eviction").join("profile.pb.gz");
    let mut args = vec!["record", "--duration", "6", "--max-unwind-table-mib", "1"];
    let pids: Vec<String> = workloads.iter().map(|w| w.pid().to_string()).collect();
    for pid in &pids {
        args.extend_from_slice(&["--pid", pid]);
    }
    args.extend_from_slice(&["--output", out.to_str().unwrap(), "--summary-json", "-"]);
    let summary = sonde_ok(&args);
    eprintln!("{summary}");
    assert!(
        summary_field(&summary, "unwind_table_evictions") > 0.0,
        "no table was evicted:\n{summary}"
    );
    assert!(
        summary_field(&summary, "unwind_table_memory_bytes") <= 1048576.0,
        "tables over the budget:\n{summary}"
    );
    let samples = resolve(&read_pprof(&out));
    let sampled = workloads
        .iter()
        .filter(|w| total(&samples, w.pid(), 0) > 0)
        .count();
    assert!(sampled >= 30, "only {sampled} of 40 processes have samples");
}
