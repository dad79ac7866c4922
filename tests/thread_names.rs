//! Thread identity on samples: a C program names its two CPU-burning threads with
//! `pthread_setname_np` (`tn_alpha` in `burn_alpha`, `tn_beta` in `burn_beta`) and prints each one's
//! thread id. sonde aggregates per thread in the kernel, so every sample of a worker's function carries
//! that worker's `thread_id` and `thread_name` labels (Parca's names; `comm` holds the same name), and
//! the two workers are told apart though they share the process.

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
};

use crate::common::*;

#[test]
fn samples_carry_the_thread_id_and_name_of_the_thread_that_ran() {
    require_root();
    let bin = build_workload("named_threads", "named_threads", FP_FLAGS);
    let dir = temp_dir("thread_names");
    let mut child = Command::new(&bin)
        .arg("8")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting named_threads");
    let stdout = child.stdout.take().unwrap();
    let workload = Workload::adopt(child);
    // "NAME TID" of each worker, printed once it has named itself.
    let tids: HashMap<String, i64> = BufReader::new(stdout)
        .lines()
        .take(2)
        .map(|l| {
            let l = l.unwrap();
            let (name, tid) = l.split_once(' ').unwrap();
            (name.to_owned(), tid.parse().unwrap())
        })
        .collect();
    assert_eq!(tids.len(), 2, "{tids:?}");
    let out = dir.join("threads.pb.gz");
    record_pid(workload.pid(), "4", &[], &out);
    let samples = resolve(&read_pprof(&out));
    let pid = i64::from(workload.pid());
    for (function, name) in [("burn_alpha", "tn_alpha"), ("burn_beta", "tn_beta")] {
        let theirs: Vec<&Resolved> = samples
            .iter()
            .filter(|s| s.pid == pid && s.user().first() == Some(&function))
            .collect();
        let n: i64 = theirs.iter().map(|s| s.values[0]).sum();
        assert!(n >= 100, "only {n} samples in {function}");
        for s in &theirs {
            assert_eq!(
                (s.tid, s.thread_name.as_str(), s.comm.as_str()),
                (tids[name], name, name),
                "a sample of {function} is not {name}'s (tid {}): {s:?}",
                tids[name]
            );
        }
    }
    assert_ne!(tids["tn_alpha"], tids["tn_beta"]);
    assert!(
        samples
            .iter()
            .filter(|s| s.pid == pid)
            .all(|s| s.tid > 0 && !s.thread_name.is_empty()),
        "a sample without its thread"
    );
}
