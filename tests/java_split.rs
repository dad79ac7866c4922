//! Java methods in the stacks, without JVM flags: `Split` spends 50/30/20% of its main thread in
//! `burnA`/`burnB`/`burnC`, each calling the two-line `step`, and measures that split itself with
//! `System.nanoTime`. sonde's shares of the main thread's samples agree with the workload's own
//! accounting within ±5 points, every burner sits under `Split.main` in ≥ 80% of its samples, and
//! after JIT warm-up `step`, which the JIT inlines into each burner, is still its own frame. The same
//! holds for OpenJDK 11, 17 and 21, and with `-Xint` (every frame interpreted).

use crate::common;
use common::{Resolved, java::*, require_root};

/// Runs `Split` under `java` with `options`, records its main thread, checks the split; returns the
/// main thread's samples for more checks.
fn check_split(java: &str, options: &[&str], name: &str) -> (Vec<Resolved>, u32) {
    // 4 s of warm-up lets C2 compile the burners; the accounted part lasts until the recording ends.
    let jvm = Jvm::start(java, options, "Split", &["60", "4"]);
    let pid = jvm.pid();
    let (samples, summary) = record(pid, "8", &[], name);
    let output = jvm.finish();
    let truth = accounted(&output);
    let main = main_thread(&samples, pid);
    let burners: i64 = ["Split.burnA", "Split.burnB", "Split.burnC"]
        .iter()
        .map(|b| weight_with(&main, |f| f == *b))
        .sum();
    assert!(
        burners > 400,
        "{name}: only {burners} main-thread samples in a burner\n{summary}"
    );
    common::assert_sample_cost(&summary, "java");
    let unnamed = weight_with(&main, |f| f == "?");
    eprintln!(
        "{name}: main-thread samples {}, in burners {burners}, with an unnamed frame {unnamed}; accounted {truth:?}",
        weight(&main)
    );
    for (burner, want) in &truth {
        let function = format!("Split.{burner}");
        let of_burner: Vec<&Resolved> = main
            .iter()
            .copied()
            .filter(|s| s.user().contains(&function.as_str()))
            .collect();
        let got = 100.0 * weight(&of_burner) as f64 / burners as f64;
        let under_main = weight_with(&of_burner, |f| f == "Split.main") as f64
            / weight(&of_burner).max(1) as f64;
        eprintln!(
            "{name}: {function} {got:.1}% (accounted {want:.1}%), under main {:.1}%",
            100.0 * under_main
        );
        assert!(
            (got - want).abs() <= 5.0,
            "{name}: {function} has {got:.1}% of the burners' samples, the workload measured {want:.1}%"
        );
        assert!(
            under_main >= 0.8,
            "{name}: {function} is under Split.main in only {:.1}% of its samples",
            100.0 * under_main
        );
    }
    assert!(
        (unnamed as f64) <= 0.15 * weight(&main) as f64,
        "{name}: {unnamed} of {} main-thread samples hold an unnamed frame",
        weight(&main)
    );
    (samples, pid)
}

/// After warm-up, the inlined `step` is a frame of its own above each burner in most of its
/// samples (the loop around it is a few instructions).
fn assert_inlined_step(samples: &[Resolved], pid: u32, name: &str) {
    let main = main_thread(samples, pid);
    let burner_a: Vec<&Resolved> = main
        .iter()
        .copied()
        .filter(|s| s.user().contains(&"Split.burnA"))
        .collect();
    let with_step = weight_with(&burner_a, |f| f == "Split.step") as f64;
    let share = with_step / weight(&burner_a).max(1) as f64;
    eprintln!(
        "{name}: Split.step above Split.burnA in {:.1}%",
        100.0 * share
    );
    assert!(
        share >= 0.5,
        "{name}: the inlined Split.step is a frame in only {:.1}% of burnA's samples",
        100.0 * share
    );
}

#[test]
fn jdk17_jit_compiled_split_agrees_with_the_workload_and_keeps_inlined_methods() {
    require_root();
    let (samples, pid) = check_split(JDK17, &[], "java17_split");
    assert_inlined_step(&samples, pid, "java17_split");
}

#[test]
fn jdk21_jit_compiled_split_agrees_with_the_workload() {
    require_root();
    let java = jdk21();
    let (samples, pid) = check_split(java.to_str().unwrap(), &[], "java21_split");
    assert_inlined_step(&samples, pid, "java21_split");
}

#[test]
fn jdk11_jit_compiled_split_agrees_with_the_workload() {
    require_root();
    let java = jdk11();
    let (samples, pid) = check_split(java.to_str().unwrap(), &[], "java11_split");
    assert_inlined_step(&samples, pid, "java11_split");
}

#[test]
fn jdk17_interpreted_split_agrees_with_the_workload() {
    require_root();
    let (samples, pid) = check_split(JDK17, &["-Xint"], "java17_split_xint");
    // Interpreted, `step` is a real call: its own frame above burnA too.
    assert_inlined_step(&samples, pid, "java17_split_xint");
}

/// The JVM itself says `step` is inlined into the burners: what the inlining check relies on.
#[test]
fn the_jit_inlines_step_into_the_burners() {
    let out = std::process::Command::new(JDK17)
        .args([
            "-XX:+UnlockDiagnosticVMOptions",
            "-XX:+PrintInlining",
            "-cp",
        ])
        .arg(classes())
        .args(["Split", "1", "2"])
        .output()
        .expect("java");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("Split::step") && l.contains("inline (hot)")),
        "PrintInlining never inlined Split::step:\n{}",
        text.lines()
            .filter(|l| l.contains("Split::"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
