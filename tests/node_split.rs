//! JavaScript functions in the stacks, without Node flags: `split.js` spends 50/30/20% of its main
//! thread in `burnA`/`burnB`/`burnC` (each calling `step`) and measures that split itself with
//! `process.hrtime`. sonde's shares of the main thread's samples agree with the workload's own
//! accounting within ±5 points, every burner sits under `main` in ≥ 80% of its samples, and at most
//! 15% of the main thread's samples hold an unnamed frame: for Node 18, 20 and 22.

use crate::common;
use common::{
    java::{accounted, weight, weight_with},
    node::*,
    require_root,
};

fn check_split(node: &str, name: &str) {
    // 3 s of warm-up lets TurboFan (and Maglev on Node 22) compile the burners.
    let run = NodeRun::start(node, &[], "split.js", &["60", "3"]);
    let pid = run.pid();
    let (samples, summary) = record(pid, "8", &[], name);
    let output = run.finish();
    let truth = accounted(&output);
    let main = main_thread(&samples, pid);
    let burners: i64 = ["burnA", "burnB", "burnC"]
        .iter()
        .map(|b| weight_with(&main, |f| f == *b))
        .sum();
    assert!(
        burners > 400,
        "{name}: only {burners} main-thread samples in a burner\n{summary}"
    );
    let unnamed = weight_with(&main, |f| f == "?");
    let mut elsewhere: Vec<(i64, String)> = main
        .iter()
        .filter(|s| !s.user().iter().any(|f| f.starts_with("burn")))
        .map(|s| (s.values[0], s.user()[..s.user().len().min(8)].join(";")))
        .collect();
    elsewhere.sort();
    for (n, stack) in elsewhere.iter().rev().take(5) {
        eprintln!("{name}: {n} samples outside the burners: {stack}");
    }
    eprintln!(
        "{name}: main-thread samples {}, in burners {burners}, with an unnamed frame {unnamed}; accounted {truth:?}",
        weight(&main)
    );
    for (burner, want) in &truth {
        let of_burner: Vec<_> = main
            .iter()
            .copied()
            .filter(|s| s.user().contains(&burner.as_str()))
            .collect();
        let got = 100.0 * weight(&of_burner) as f64 / burners as f64;
        let under_main =
            weight_with(&of_burner, |f| f == "main") as f64 / weight(&of_burner).max(1) as f64;
        eprintln!(
            "{name}: {burner} {got:.1}% (accounted {want:.1}%), under main {:.1}%",
            100.0 * under_main
        );
        assert!(
            (got - want).abs() <= 5.0,
            "{name}: {burner} has {got:.1}% of the burners' samples, the workload measured {want:.1}%"
        );
        assert!(
            under_main >= 0.8,
            "{name}: {burner} is under main in only {:.1}% of its samples",
            100.0 * under_main
        );
    }
    assert!(
        (unnamed as f64) <= 0.15 * weight(&main) as f64,
        "{name}: {unnamed} of {} main-thread samples hold an unnamed frame",
        weight(&main)
    );
    common::assert_sample_cost(&summary, "v8");
    let stale = common::summary_field(&summary, "v8_frames_stale");
    eprintln!("{name}: stale JavaScript frames {stale}");
}

#[test]
fn v8_node20_split_agrees_with_the_workload() {
    require_root();
    check_split(NODE20, "node20_split");
}

#[test]
fn v8_node18_split_agrees_with_the_workload() {
    require_root();
    check_split(&node18(), "node18_split");
}

#[test]
fn v8_node22_split_agrees_with_the_workload() {
    require_root();
    check_split(&node22(), "node22_split");
}
