//! A JavaScript recursion 200 deep (`recursion.js` under Node 20): the samples at its bottom reach
//! `main` through more than perf's 127 frames of `recurse`. A JavaScript frame takes two of a stored
//! stack's 512 words (its code and its pc), so 255 of them fit. TurboFan inlines some levels of the
//! recursion into others; sonde shows the frames V8 has on the stack, so not every sample holds all
//! 201.

use crate::common;
use common::{
    java::{weight, weight_with},
    node::*,
    require_root, summary_field,
};

#[test]
fn a_javascript_recursion_200_deep_is_whole_to_main() {
    require_root();
    let run = NodeRun::start(NODE20, &[], "recursion.js", &["60", "200"]);
    let pid = run.pid();
    let (samples, summary) = record(pid, "5", &[], "node_recursion");
    run.finish();
    let main = main_thread(&samples, pid);
    let bottom: Vec<_> = main
        .iter()
        .copied()
        .filter(|s| s.user().contains(&"bottom"))
        .collect();
    let depth = |s: &common::Resolved| s.user().iter().filter(|f| **f == "recurse").count();
    let whole = weight_with(&bottom, |f| f == "main");
    let whole_deep: i64 = bottom
        .iter()
        .filter(|s| depth(s) > 127 && s.user().contains(&"main"))
        .map(|s| s.values[0])
        .sum();
    let deepest = bottom.iter().map(|s| depth(s)).max().unwrap_or(0);
    eprintln!(
        "bottom samples {}, under main {whole}, with over 127 recurse frames and main {whole_deep}, deepest {deepest}\n{summary}",
        weight(&bottom)
    );
    assert!(
        weight(&bottom) > 200,
        "too few samples in bottom\n{summary}"
    );
    assert!(
        whole_deep as f64 >= 0.95 * weight(&bottom) as f64,
        "{whole_deep} of {} bottom samples hold over 127 recurse frames and main; deepest {deepest}",
        weight(&bottom)
    );
    assert_eq!(summary_field(&summary, "walk_depth"), 0.0, "{summary}");
}
