//! Deoptimization and class unloading under load never mislabel a frame, and a frame of compiled code
//! deoptimized while it waits for its callee is walked through the pc the JVM kept for it.
//!
//! `Churn` loads two workers afresh every 40 ms through new class loaders, deoptimizes each one's
//! compiled loop, and unloads them every tenth round, so compiled code and methods are freed and
//! their memory reused while sonde records. The JVM's own logs show both happened; sonde never names
//! one worker's method under the other worker's `run`, and names most worker samples although their
//! classes were unloaded long before the recording's window was named.
//!
//! `Patched` invalidates compiled code (a second class in a hierarchy the JIT relied on) while a frame
//! of it waits beneath a 30 ms callee: the JVM patches that frame's return address to the code's
//! deoptimization handler, and the walk must name it from the original pc (`java_deopt` counts it).

use crate::common;
use common::{java::*, require_root, summary_field};

/// The worker a `Worker?.method` frame belongs to.
fn worker(function: &str) -> Option<&str> {
    function
        .split_once('.')
        .filter(|(class, _)| class.starts_with("Worker"))
        .map(|(class, _)| class)
}

#[test]
fn deoptimized_and_unloaded_code_is_never_mislabelled() {
    require_root();
    // The JVM's own account of what it unloaded and deoptimized, in a file (on stdout, its lines
    // would interleave with the workload's).
    let log_file = common::temp_dir("java").join("churn-jvm.log");
    let log_option = format!(
        "-Xlog:class+unload=info,jit+compilation=debug:file={}",
        log_file.display()
    );
    let jvm = Jvm::start(JDK17, &[&log_option], "Churn", &["60", "2"]);
    let pid = jvm.pid();
    let (samples, summary) = record(pid, "8", &[], "java17_churn");
    jvm.finish();
    let log = std::fs::read_to_string(&log_file).expect("the JVM's log");
    let deopts = log
        .lines()
        .filter(|l| l.contains("Worker") && l.contains("made not entrant"))
        .count();
    let unloads = log
        .lines()
        .filter(|l| l.contains("unloading class Worker"))
        .count();
    eprintln!("JVM: {deopts} worker methods deoptimized, {unloads} classes unloaded");
    assert!(
        deopts >= 20 && unloads >= 20,
        "the workload churned too little:\n{summary}"
    );

    let main = main_thread(&samples, pid);
    let (mut in_workers, mut named, mut crossed) = (0i64, 0i64, Vec::new());
    for s in &main {
        let user = s.user();
        // Leaf first: each worker method frame must sit under its own worker's `run`.
        let Some(run) = user
            .iter()
            .position(|f| f.ends_with(".run") && worker(f).is_some())
        else {
            continue;
        };
        in_workers += s.values[0];
        let owner = worker(user[run]);
        if user[..run].iter().all(|f| *f != "?") {
            named += s.values[0];
        }
        for f in &user[..run] {
            if let Some(other) = worker(f)
                && Some(other) != owner
            {
                crossed.push(user.join(";"));
            }
        }
    }
    eprintln!("main-thread samples in a worker {in_workers}, fully named {named}\n{summary}");
    assert!(in_workers > 200, "only {in_workers} samples in the workers");
    assert!(
        crossed.is_empty(),
        "frames of one worker under the other's run:\n{}",
        crossed.join("\n")
    );
    assert!(
        named as f64 >= 0.8 * in_workers as f64,
        "only {named} of {in_workers} worker samples are named above the worker's run"
    );
    // Not asserted: frames found gone. Compiled code's methods are read when the kernel first walks
    // it, while it is live, so frames of code freed later are still named from that reading (the
    // `named` share above, with classes unloaded every 400 ms and names given seconds later); `stale`
    // and `deopt` count only the rare race of a sample inside that gap, or an uncommon trap caught
    // mid-flight, and are often zero here.
    eprintln!(
        "gone: stale {} deoptimized {}",
        summary_field(&summary, "java_frames_stale"),
        summary_field(&summary, "java_deopt")
    );
}

#[test]
fn a_frame_of_deoptimized_code_is_walked_through_its_original_pc() {
    require_root();
    let log_file = common::temp_dir("java").join("patched-jvm.log");
    let log_option = format!("-Xlog:jit+compilation=debug:file={}", log_file.display());
    // `callee` keeps a frame of its own, so `caller`'s compiled frame waits beneath it.
    let jvm = Jvm::start(
        JDK17,
        &[
            &log_option,
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,PatchedCaller::callee",
        ],
        "Patched",
        &["60", "1"],
    );
    let pid = jvm.pid();
    let (samples, summary) = record(pid, "6", &[], "java17_patched");
    jvm.finish();
    let log = std::fs::read_to_string(&log_file).expect("the JVM's log");
    let invalidated = log
        .lines()
        .filter(|l| l.contains("PatchedCaller::") && l.contains("made not entrant"))
        .count();
    eprintln!("JVM: {invalidated} compilations of PatchedCaller made not entrant");
    assert!(invalidated >= 20, "the workload deoptimized too little");

    // Every burn in `callee` sits under `caller` and `applyAsLong`, named, whether or not the sample
    // caught `caller`'s frame patched: the walk takes the original pc the JVM kept in the frame.
    let main = main_thread(&samples, pid);
    let (mut burning, mut chained, mut wrong) = (0i64, 0i64, Vec::new());
    for s in &main {
        let user = s.user();
        let Some(callee) = user.iter().position(|f| *f == "PatchedCaller.callee") else {
            continue;
        };
        burning += s.values[0];
        let Some(round) = user.iter().position(|f| *f == "Patched.round") else {
            continue;
        };
        let between = &user[callee + 1..round.max(callee + 1)];
        if between == ["PatchedCaller.caller", "PatchedCaller.applyAsLong"] {
            chained += s.values[0];
        } else if between
            .iter()
            .any(|f| *f != "?" && !f.starts_with("PatchedCaller.") && !f.starts_with("[jvm stub]"))
        {
            wrong.push(user.join(";"));
        }
    }
    eprintln!(
        "main-thread samples in callee {burning}, under caller and applyAsLong {chained}\n{summary}"
    );
    assert!(burning > 200, "only {burning} samples in the callee");
    assert!(
        wrong.is_empty(),
        "other frames between the callee and its callers:\n{}",
        wrong.join("\n")
    );
    assert!(
        chained as f64 >= 0.8 * burning as f64,
        "only {chained} of {burning} callee samples walk through caller and applyAsLong"
    );
    // The counter moves: frames walked while their return address led to the deoptimization handler.
    assert!(
        summary_field(&summary, "java_deopt") > 0.0,
        "no deoptimized frame counted:\n{summary}"
    );
}
