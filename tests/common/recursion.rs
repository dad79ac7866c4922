//! What the deep-recursion tests of the runtimes walked in place (Java, JavaScript) assert: the
//! samples at the recursion's bottom hold every level of it and the thread's entry below, past the
//! depth a stack of two-word frames held before (255 frames in 512 words).

use super::Resolved;

/// Of `thread`'s samples in `leaf`: at least 95% (by weight, and over 200 samples) hold more than
/// `deeper_than` frames named `level` and reach `root`; and no walk was cut at the depth limit.
pub fn assert_whole_to_root(
    thread: &[&Resolved],
    leaf: &str,
    level: &str,
    root: &str,
    deeper_than: usize,
    summary: &str,
) {
    let weight = |samples: &[&Resolved]| samples.iter().map(|s| s.values[0]).sum::<i64>();
    let bottom: Vec<&Resolved> = thread
        .iter()
        .copied()
        .filter(|s| s.user().contains(&leaf))
        .collect();
    let depth = |s: &Resolved| s.user().iter().filter(|f| **f == level).count();
    let whole: Vec<&Resolved> = bottom
        .iter()
        .copied()
        .filter(|s| depth(s) > deeper_than && s.user().contains(&root))
        .collect();
    let deepest = bottom.iter().map(|s| depth(s)).max().unwrap_or(0);
    eprintln!(
        "{leaf}: samples {}, with over {deeper_than} {level} frames and {root} {}, deepest {deepest}\n{summary}",
        weight(&bottom),
        weight(&whole)
    );
    assert!(
        weight(&bottom) > 200,
        "too few samples in {leaf}\n{summary}"
    );
    assert!(
        weight(&whole) as f64 >= 0.95 * weight(&bottom) as f64,
        "{} of {} {leaf} samples hold over {deeper_than} {level} frames and {root}; deepest {deepest}",
        weight(&whole),
        weight(&bottom)
    );
    assert_eq!(
        super::summary_field(summary, "walk_depth"),
        0.0,
        "{summary}"
    );
}
