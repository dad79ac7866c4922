//! Truncated stacks (missing frame pointers): a warning when one side has a much larger share of them.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, diff_json, profile, scratch, stack, write};

fn stderr_of(name: &str, base: &[fixtures::Stack], new: &[fixtures::Stack]) -> String {
    let dir = scratch(name);
    let b = write(&dir.join("b.pb.gz"), &profile(Kind::Cpu, 10.0, base));
    let n = write(&dir.join("n.pb.gz"), &profile(Kind::Cpu, 10.0, new));
    diff_json([
        "--base".as_ref(),
        b.as_os_str(),
        "--new".as_ref(),
        n.as_os_str(),
    ])
    .1
}

#[test]
fn labelled_truncation_on_one_side_warns() {
    let stderr = stderr_of(
        "truncated_label",
        &[stack("main;work", 950), stack("work", 50).truncated()],
        &[stack("main;work", 700), stack("work", 300).truncated()],
    );
    assert!(
        stderr.contains("truncated stacks") && stderr.contains("5.0% of base but 30.0% of new"),
        "{stderr}"
    );
}

#[test]
fn an_unsymbolized_root_counts_as_truncated() {
    let stderr = stderr_of(
        "truncated_root",
        &[stack("main;work", 1_000)],
        &[stack("main;work", 800), stack("0x4f0;work", 200)],
    );
    assert!(stderr.contains("0.0% of base but 20.0% of new"), "{stderr}");
}

#[test]
fn similar_truncation_does_not_warn() {
    let stderr = stderr_of(
        "truncated_similar",
        &[stack("main;work", 950), stack("work", 50).truncated()],
        &[stack("main;work", 900), stack("work", 100).truncated()],
    );
    assert!(!stderr.contains("truncated"), "{stderr}");
}
