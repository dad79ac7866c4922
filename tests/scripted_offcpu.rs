//! Off-CPU Ruby and PHP stacks: `sleep.rb` under Debian's `ruby3.1` and `sleep.php` under its
//! `php8.2` alternate a 20 ms sleep in `sleep_twenty` and a 10 ms one in `sleep_ten`. The kernel
//! walks the language's frames of a thread as it blocks, as it does on CPU: each process's off-CPU
//! time splits 2:1 between the two functions (±10%), named with the script's file, root-ward of the
//! kernel's frames in the same stacks. A Ruby thread asleep while another burns CPU in Ruby keeps
//! its own frames: never the burner's, which 2.7's one shared running context points at then.

use crate::common;
use common::{
    python::{PySample, of_pid, resolve_frames, weight},
    read_pprof, record_pid, require_root,
    scripted::{Interpreter, PHP, RUBY, RUBY27},
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
    let (twenty, ten) = (ns(&lang.top("sleep_twenty")), ns(&lang.top("sleep_ten")));
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
        let at = s
            .frames
            .iter()
            .position(|f| f.function == lang.top("sleep_twenty"));
        let kernel = s.frames.iter().position(|f| f.is_kernel());
        matches!((kernel, at), (Some(k), Some(p)) if k < p)
    });
    assert!(
        kernel_under_language,
        "no stack with kernel frames leaf-ward of sleep_twenty"
    );
}

#[test]
fn a_sleeping_ruby_thread_never_takes_the_burners_frames() {
    own_frames_per_thread(&RUBY, &[]);
    own_frames_per_thread(&RUBY27, &["--disable-gems"]);
}

/// `threads.rb` under `lang`: the main thread sleeps in `nap` without the VM's lock while a second
/// thread burns CPU in `burn`. Off CPU, no sample of the main thread holds `burn` (2.7's shared
/// context is the burner's then: the main thread's Ruby frames are left out, where 3.x's thread-local
/// context gives it `nap`); on CPU, the burner's samples hold `burn`.
fn own_frames_per_thread(lang: &Interpreter, flags: &[&str]) {
    require_root();
    let (mut child, _out) = lang.start(flags, "threads.rb", &["14"]);
    let pid = child.id();
    let binary = lang.binary();
    let name = binary.file_name().unwrap().to_string_lossy();
    let dir = temp_dir(&format!("ruby_threads_{name}"));
    let off = dir.join("offcpu.pb.gz");
    let on = dir.join("cpu.pb.gz");
    let args = ["--profile", "offcpu", "--offcpu-budget", "0"];
    let off_summary = record_pid(pid, "3", &args, &off);
    let on_summary = record_pid(pid, "3", &["--frequency", "199"], &on);
    let _ = child.kill();
    let _ = child.wait();
    let has = |s: &PySample, f: &str| lang.frames(s).any(|p| p.function == f);
    let main = |s: &&PySample| s.tid == i64::from(pid);
    let off = of_pid(resolve_frames(&read_pprof(&off)), pid);
    let asleep: Vec<&PySample> = off.iter().filter(main).collect();
    let (burn, nap) = (lang.top("burn"), lang.top("nap"));
    let wrong = weight(asleep.iter().copied().filter(|s| has(s, &burn)));
    let napping = weight(asleep.iter().copied().filter(|s| has(s, &nap)));
    let all = weight(asleep.iter().copied());
    eprintln!(
        "{}: main thread off CPU {all} ns, {napping} in nap, {wrong} in burn",
        binary.display()
    );
    assert!(
        all > 1_000_000_000 && wrong == 0,
        "{}: the sleeping main thread holds burn for {wrong} of its {all} ns\n{off_summary}",
        binary.display()
    );
    let thread_local = lang.peer.is_none();
    assert!(
        !thread_local || napping as f64 >= 0.8 * all as f64,
        "{}: the main thread holds nap for only {napping} of its {all} ns off CPU",
        binary.display()
    );
    let on = of_pid(resolve_frames(&read_pprof(&on)), pid);
    let burning: Vec<&PySample> = on.iter().filter(|s| !main(s)).collect();
    let burns = weight(burning.iter().copied().filter(|s| has(s, &burn)));
    let all = weight(burning.iter().copied());
    assert!(
        all > 200 && burns as f64 >= 0.8 * all as f64,
        "{}: the burner holds burn in only {burns} of its {all} samples on CPU\n{on_summary}",
        binary.display()
    );
}
