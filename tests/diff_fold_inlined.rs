//! `--fold-inlined`: an inlining difference must not move cost between frames.
//!
//! Base was symbolized with inline information (`helper` inlined into `caller`, one location with the
//! chain `[helper, caller]`); new runs the same code, but in one case the symbolizer lost the inline
//! chain and in the other the build called `helper` out of line. Without folding, cost moves from `helper`
//! to `caller`; with folding, nothing changes.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, diff_json, num, profile, row, scratch, stack, write};

fn args(name: &str, new_stack: &str, fold: bool) -> Vec<std::ffi::OsString> {
    let dir = scratch(name);
    let base = write(
        &dir.join("b.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[stack("main;helper<caller", 400), stack("main;other", 600)],
        ),
    );
    let new = write(
        &dir.join("n.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[stack(new_stack, 400), stack("main;other", 600)],
        ),
    );
    let mut a: Vec<std::ffi::OsString> =
        vec!["--base".into(), base.into(), "--new".into(), new.into()];
    if fold {
        a.push("--fold-inlined".into());
    }
    a
}

#[test]
fn without_folding_a_lost_inline_chain_moves_cost_to_the_caller() {
    let (json, _) = diff_json(args("fold_off", "main;caller", false));
    let (_, helper) = row(&json, "helper");
    let (_, caller) = row(&json, "caller");
    assert_eq!(num(helper, "delta_self_pct"), -40.0, "{json}");
    assert_eq!(num(caller, "delta_self_pct"), 40.0, "{json}");
}

#[test]
fn folding_keeps_cost_on_the_caller_when_the_chain_is_lost() {
    let (json, _) = diff_json(args("fold_lost_chain", "main;caller", true));
    let (_, caller) = row(&json, "caller");
    assert_eq!(num(caller, "base_self_pct"), 40.0, "{json}");
    assert_eq!(num(caller, "delta_self_pct"), 0.0, "{json}");
    assert!(
        json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["function"] != "helper"),
        "{json}"
    );
}

#[test]
fn folding_merges_an_out_of_line_call_of_an_inlined_function() {
    let (json, _) = diff_json(args("fold_out_of_line", "main;caller;helper", true));
    for r in json["rows"].as_array().unwrap() {
        assert_eq!(num(r, "delta_self_pct"), 0.0, "{json}");
        assert_eq!(num(r, "delta_total_pct"), 0.0, "{json}");
    }
    assert_eq!(num(row(&json, "caller").1, "new_self_pct"), 40.0);
}
