//! Processes that live milliseconds are unwound from their first sample: the kernel records the
//! executable mappings of every process that execs while sonde runs (at exec and at each executable
//! `mmap`) and finds each binary's table by device and inode, so it needs nothing from userspace per
//! process. Frames found that way are stored file-relative and named after the process is gone.
//!
//! - A build loop (Debian's gcc compiling 40 small C files two at a time, again and again; `gcc`, `cc1`
//!   and `as` live 10-50 ms each), recorded host-wide: at least 90% of the samples of each of the three
//!   are complete (reach a thread root, or were taken where the process had no user stack: exiting
//!   after its address space was torn down, or inside `execve` between two images, as the kernel
//!   says), and the walks of processes younger than 10 ms reach a root as often.
//! - A shell loop of a frame-pointer-less binary that lives 5 ms per run: at least 90% of its samples
//!   reach a thread root with every user frame named, and most are in its burning function (the rest
//!   is the dynamic loader starting the process, a large part of 5 ms).

use crate::common;
use std::collections::BTreeMap;

use common::{
    host::{ShellLoop, record_host},
    *,
};

/// Samples (by count) per comm among `comms`, and how many of them are complete (not truncated) and
/// contain `named` (when given).
fn by_comm(
    samples: &[Resolved],
    comms: &[&str],
    named: Option<&str>,
) -> BTreeMap<String, (i64, i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64, i64)> = BTreeMap::new();
    for s in samples.iter().filter(|s| comms.contains(&s.comm.as_str())) {
        let e = out.entry(s.comm.clone()).or_default();
        e.0 += s.values[0];
        if !s.truncated {
            e.1 += s.values[0];
        }
        if named.is_some_and(|f| s.functions.iter().any(|g| g == f)) {
            e.2 += s.values[0];
        }
    }
    out
}

/// The most frequent user stacks (leaf first) of the samples of `comm` that `keep` selects, for the
/// failure report.
fn top_stacks(samples: &[Resolved], comm: &str, keep: impl Fn(&Resolved) -> bool) -> String {
    let mut stacks: BTreeMap<String, i64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.comm == comm && keep(s)) {
        *stacks.entry(s.functions.join(" <- ")).or_default() += s.values[0];
    }
    let mut v: Vec<(String, i64)> = stacks.into_iter().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v.iter()
        .take(6)
        .map(|(stack, n)| format!("  {n:>4} {stack}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_compile_loop_reaches_the_thread_root_in_gcc_cc1_and_as() {
    require_root();
    let dir = temp_dir("short_lived_build");
    let script = format!(
        "exec sh {} {}",
        root().join("tests/workloads/build_loop.sh").display(),
        dir.join("sources").display()
    );
    let build = ShellLoop::start(&script);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = dir.join("profile.pb.gz");
    let summary = record_host("8", &out);
    drop(build);

    let samples = resolve(&read_pprof(&out));
    let counts = by_comm(&samples, &["gcc", "cc1", "as"], None);
    let report: Vec<String> = counts
        .iter()
        .map(|(comm, (all, complete, _))| {
            format!(
                "{comm:<4} {complete:>5} of {all:>5} complete ({:.1}%)",
                100.0 * *complete as f64 / *all as f64
            )
        })
        .collect();
    eprintln!("{}\n{summary}", report.join("\n"));
    for comm in ["gcc", "cc1", "as"] {
        eprintln!(
            "{comm}, truncated:\n{}",
            top_stacks(&samples, comm, |s| s.truncated)
        );
    }
    let all: i64 = counts.values().map(|(all, _, _)| all).sum();
    assert!(
        all > 300,
        "only {all} samples of gcc, cc1 and as in 8 s of a build loop\n{summary}"
    );
    assert!(
        summary_field(&summary, "vma_walks") > 0.0,
        "no walk used the mappings the kernel recorded\n{summary}"
    );
    for comm in ["gcc", "cc1", "as"] {
        let (all, complete, _) = counts.get(comm).copied().unwrap_or_default();
        assert!(
            all >= 30 && complete as f64 >= 0.9 * all as f64,
            "{comm}: {complete} of {all} samples complete, want 90%\n{}",
            report.join("\n")
        );
    }
    // The first milliseconds of a process: its dynamic loader relocating, lazy binding, vfork.
    for age in ["0-1ms", "1-10ms"] {
        let key = format!("walks_age_{}", age.replace('-', "_"));
        let (walks, root) = (
            summary_field(&summary, &key),
            summary_field(&summary, &format!("walk_root_ratio_by_age[{age}]")),
        );
        assert!(
            walks >= 30.0 && root >= 0.9,
            "walks of processes {age} old: {walks}, {:.1}% reaching a root, want 90%\n{summary}",
            100.0 * root
        );
    }
}

#[test]
fn a_binary_living_five_milliseconds_is_unwound_and_named() {
    require_root();
    let bin = build_workload("short_lived", "short_lived_nofp", NOFP_FLAGS);
    let dir = temp_dir("short_lived_5ms");
    let script = format!("while :; do {} 0.005 || exit 1; done", bin.display());
    let runs = ShellLoop::start(&script);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = dir.join("profile.pb.gz");
    let summary = record_host("6", &out);
    drop(runs);

    let samples = resolve(&read_pprof(&out));
    // comm is the file name cut to 15 bytes.
    let comm = "short_lived_nof";
    let counts = by_comm(&samples, &[comm], Some("short_lived_burn"));
    let (all, complete, burning) = counts.get(comm).copied().unwrap_or_default();
    let named: i64 = samples
        .iter()
        .filter(|s| s.comm == comm && !s.truncated && s.user().iter().all(|f| *f != "?"))
        .map(|s| s.values[0])
        .sum();
    eprintln!(
        "{comm}: {all} samples, {complete} complete, {named} complete and named, {burning} in \
         short_lived_burn\n{summary}"
    );
    eprintln!(
        "without short_lived_burn:\n{}",
        top_stacks(&samples, comm, |s| !s
            .functions
            .iter()
            .any(|f| f == "short_lived_burn"))
    );
    assert!(
        all > 100,
        "only {all} samples of the 5 ms processes in 6 s\n{summary}"
    );
    assert!(
        complete as f64 >= 0.9 * all as f64,
        "{complete} of {all} samples of the 5 ms processes reach a thread root, want 90%"
    );
    assert!(
        named as f64 >= 0.9 * all as f64,
        "{named} of {all} samples of the 5 ms processes are complete with every frame named, want 90%"
    );
    // The kernel's own figure for young processes agrees: most walks of the 5 ms runs fall in the
    // 1-10 ms age bucket (since fork), and nearly all of those are complete. (The 0-1 ms bucket is
    // mostly the shell's children inside execve, with no user stack of their own yet.)
    let young = summary_field(&summary, "walks_age_1_10ms");
    let young_root = summary_field(&summary, "walk_root_ratio_by_age[1-10ms]");
    assert!(
        young >= 0.5 * all as f64 && young_root >= 0.8,
        "{young} walks of processes 1-10 ms old, {young_root} of them reaching a root: want at least half \
         the {all} samples of the 5 ms processes, and 80%\n{summary}"
    );
    assert!(
        burning as f64 >= 0.5 * all as f64,
        "only {burning} of {all} samples of the 5 ms processes are in short_lived_burn"
    );
}
