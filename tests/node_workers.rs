//! JavaScript of a `worker_threads` Worker: `workers.js` burns on its main thread in `mainBurn`
//! (under `mainLoop`) and on a Worker, an isolate of its own on a thread it names `js-worker`, in
//! `workerBurn` (under `workerMain`), which keeps enough garbage for V8's platform threads to mark and
//! sweep. sonde walks both isolates the same way (the walk reads each frame's own slots and the
//! objects they point to, nothing per isolate), so ≥ 80% of each thread's samples hold its burner
//! under its entry, neither thread shows the other's functions, and V8's platform threads (`node`,
//! and `DelayedTaskSche` on Node 22) hold no JavaScript frame.
//!
//! What sonde does not show: functions inlined into on-stack-replaced (OSR) code. A loop that runs
//! long in one call is compiled while it runs; that code is not the function's `code` (V8 keeps it
//! in the feedback vector's OSR cache), so the kernel cannot tell where the pc is in it and names the
//! frame by its function alone, without what was inlined. The workload's burners therefore run in
//! 10 ms turns (as `split.js`'s do), so they are not inlined into their caller's loop. V8's own
//! profiler (`--cpu-prof`) does not show inlined functions either.

use crate::common;
use common::{
    java::{weight, weight_with},
    node::*,
    require_root,
};

/// The Worker's thread, as it names itself.
const WORKER_COMM: &str = "js-worker";
/// The thread of `control.js` that waits for the end of input (blocked in read()).
const EOF_COMM: &str = "node-eof";

/// The share of `samples` holding `burner` with `entry` below it (stacks are leaf first).
fn under(samples: &[&common::Resolved], burner: &str, entry: &str) -> f64 {
    let hit: i64 = samples
        .iter()
        .filter(|s| {
            let user = s.user();
            let b = user.iter().position(|f| *f == burner);
            let e = user.iter().rposition(|f| *f == entry);
            matches!((b, e), (Some(b), Some(e)) if b < e)
        })
        .map(|s| s.values[0])
        .sum();
    hit as f64 / weight(samples).max(1) as f64
}

fn check_workers(node: &str, name: &str) {
    let run = NodeRun::start(node, &[], "workers.js", &["60"]);
    let pid = run.pid();
    let comms: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_owned())
        .collect();
    let (samples, summary) = record(pid, "8", &[], name);
    let output = run.finish();
    eprintln!("{name}: threads {comms:?}; {}", output.trim());
    assert!(
        comms.iter().any(|c| c == WORKER_COMM),
        "{name}: no thread named {WORKER_COMM} in {comms:?}"
    );

    let main = main_thread(&samples, pid);
    let worker = thread(&samples, pid, WORKER_COMM);
    let platform: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.pid == i64::from(pid)
                && ![MAIN_COMM, WORKER_COMM, EOF_COMM].contains(&s.comm.as_str())
        })
        .collect();
    let with_js: Vec<_> = platform
        .iter()
        .copied()
        .filter(|s| leaf_js(s).is_some())
        .collect();
    let (main_share, worker_share) = (
        under(&main, "mainBurn", "mainLoop"),
        under(&worker, "workerBurn", "workerMain"),
    );
    eprintln!(
        "{name}: main {} samples, {:.1}% mainBurn under mainLoop; worker {} samples, {:.1}% workerBurn \
         under workerMain; V8's threads {} samples, {} with a JavaScript frame; stale {}",
        weight(&main),
        100.0 * main_share,
        weight(&worker),
        100.0 * worker_share,
        weight(&platform),
        weight(&with_js),
        common::summary_field(&summary, "v8_frames_stale")
    );
    for samples in [&main, &worker] {
        let mut stacks: std::collections::HashMap<String, i64> = Default::default();
        for s in samples.iter() {
            *stacks
                .entry(format!(
                    "{} {}",
                    s.comm,
                    s.user()[..s.user().len().min(6)].join(";")
                ))
                .or_default() += s.values[0];
        }
        let mut stacks: Vec<_> = stacks.into_iter().collect();
        stacks.sort_by_key(|(_, n)| -n);
        for (stack, n) in stacks.iter().take(4) {
            eprintln!("{name}: {n} {stack}");
        }
    }
    for s in with_js.iter().take(5) {
        eprintln!(
            "{name}: {} {:?}",
            s.comm,
            &s.user()[..s.user().len().min(10)]
        );
    }
    assert!(
        weight(&main) > 300 && weight(&worker) > 300,
        "{name}: too few samples: main {}, worker {}\n{summary}",
        weight(&main),
        weight(&worker)
    );
    assert!(
        main_share >= 0.8,
        "{name}: only {:.1}% of the main thread's samples hold mainBurn under mainLoop",
        100.0 * main_share
    );
    assert!(
        worker_share >= 0.8,
        "{name}: only {:.1}% of the Worker's samples hold workerBurn under workerMain",
        100.0 * worker_share
    );
    let crossed = weight_with(&main, |f| f == "workerBurn" || f == "workerMain")
        + weight_with(&worker, |f| f == "mainBurn" || f == "mainLoop");
    assert_eq!(
        crossed, 0,
        "{name}: {crossed} samples show the other thread's functions"
    );
    // The garbage keeps V8's threads busy enough to be sampled, so the check below has samples to
    // look at.
    assert!(
        weight(&platform) >= 10,
        "{name}: only {} samples of V8's own threads",
        weight(&platform)
    );
    assert_eq!(
        weight(&with_js),
        0,
        "{name}: {} samples of V8's own threads hold a JavaScript frame",
        weight(&with_js)
    );
}

#[test]
fn v8_node20_worker_threads_are_named() {
    require_root();
    check_workers(NODE20, "node20_workers");
}

#[test]
fn v8_node22_worker_threads_are_named() {
    require_root();
    check_workers(&node22(), "node22_workers");
}
