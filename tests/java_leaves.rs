//! A JIT-compiled leaf sampled while its frame is half built or half gone (`Leaves`, OpenJDK 17):
//! a leaf method that calls nothing allocates its frame before it saves rbp, and every method's
//! epilogue runs a return poll between `pop rbp` and `ret`. HotSpot's frame size does not hold at
//! those instructions; the walk tells them by their bytes, and the leaf's samples stay under
//! `Leaves.spin` and `Leaves.main`.

use crate::common;
use common::{Resolved, java::*, require_root};

#[test]
fn a_compiled_leaf_in_its_prologue_or_epilogue_keeps_its_callers() {
    require_root();
    let jvm = Jvm::start(
        JDK17,
        &[
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,Leaves::leaf",
        ],
        "Leaves",
        &["60"],
    );
    let pid = jvm.pid();
    let (samples, summary) = record(pid, "4", &[], "java_leaves");
    jvm.finish();
    let main = main_thread(&samples, pid);
    let in_leaf: Vec<&Resolved> = main
        .iter()
        .copied()
        .filter(|s| s.user().first() == Some(&"Leaves.leaf"))
        .collect();
    let whole = weight_with(&in_leaf, |f| f == "Leaves.main");
    let under_spin = in_leaf
        .iter()
        .filter(|s| s.user().get(1) == Some(&"Leaves.spin"))
        .map(|s| s.values[0])
        .sum::<i64>();
    eprintln!(
        "Leaves.leaf: {} samples, {under_spin} right under Leaves.spin, {whole} reaching Leaves.main\n{summary}",
        weight(&in_leaf)
    );
    assert!(
        weight(&in_leaf) >= 100,
        "only {} samples in Leaves.leaf\n{summary}",
        weight(&in_leaf)
    );
    // Every sample: a step that misreads a half-built frame loses the callers or skips one.
    assert_eq!(
        whole,
        weight(&in_leaf),
        "Leaves.leaf's samples not reaching main\n{summary}"
    );
    assert_eq!(
        under_spin,
        weight(&in_leaf),
        "Leaves.leaf's samples not right under spin\n{summary}"
    );
}
