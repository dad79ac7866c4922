//! Off-CPU Ruby and PHP stacks: `sleep.rb` under Debian's `ruby3.1` and `sleep.php` under its
//! `php8.2` alternate a 20 ms sleep in `sleep_twenty` and a 10 ms one in `sleep_ten`. The kernel
//! walks the language's frames of a thread as it blocks, as it does on CPU: each process's off-CPU
//! time splits 2:1 between the two functions (±10%), named with the script's file, root-ward of the
//! kernel's frames in the same stacks.

use crate::common;
use common::{
    python::{PySample, of_pid, resolve_frames, weight},
    read_pprof, record_pid, require_root,
    scripted::{Interpreter, PHP, RUBY},
    summary_field, temp_dir,
};

#[test]
fn ruby_sleeps_split_two_to_one_by_method() {
    sleeps_split_two_to_one(&RUBY, "sleep.rb");
}

#[test]
fn php_sleeps_split_two_to_one_by_function() {
    sleeps_split_two_to_one(&PHP, "sleep.php");
}

fn sleeps_split_two_to_one(lang: &Interpreter, script: &str) {
    require_root();
    let (mut child, _out) = lang.start(&[], script, &["30"]);
    let pid = child.id();
    let profile = temp_dir(&format!("offcpu_{script}")).join("profile.pb.gz");
    // Every episode tracked (budget 0): this is about which function an episode is charged to,
    // not about the sampling estimate (the offcpu_sampling tests judge that).
    let summary = record_pid(
        pid,
        "4",
        &["--profile", "offcpu", "--offcpu-budget", "0"],
        &profile,
    );
    let _ = child.kill();
    let _ = child.wait();
    let samples = of_pid(resolve_frames(&read_pprof(&profile)), pid);
    let file = lang.script(script);
    let has = |s: &PySample, f: &str| {
        lang.frames(s)
            .any(|p| p.function == f && p.file == file.to_str().unwrap())
    };
    let ns = |f: &str| weight(samples.iter().filter(|s| has(s, f))) as f64;
    let (twenty, ten) = (ns("sleep_twenty"), ns("sleep_ten"));
    eprintln!(
        "{script}: sleep_twenty={:.0}ms sleep_ten={:.0}ms all={:.0}ms",
        twenty / 1e6,
        ten / 1e6,
        weight(&samples) as f64 / 1e6
    );
    // The thread sleeps nearly all of the 4 s, and all of it in the two functions.
    common::assert_two_to_one(twenty, ten, 3.0e9);
    // Each switch-out's walk read the language's frames whole.
    let walks = summary_field(&summary, &format!("{}_walks", lang.runtime));
    let failed = summary_field(&summary, &format!("{}_read_fault", lang.runtime))
        + summary_field(&summary, &format!("{}_truncated", lang.runtime));
    assert!(
        walks > 100.0 && failed == 0.0,
        "{walks} {} walks off-CPU, {failed} failed",
        lang.runtime
    );
    let kernel_under_language = samples.iter().any(|s| {
        let at = s.frames.iter().position(|f| f.function == "sleep_twenty");
        let kernel = s.frames.iter().position(|f| f.is_kernel());
        matches!((kernel, at), (Some(k), Some(p)) if k < p)
    });
    assert!(
        kernel_under_language,
        "no stack with kernel frames leaf-ward of sleep_twenty"
    );
}
