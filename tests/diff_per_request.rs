//! Per-request (and per-second) normalisation changes the ranking where it should.
//!
//! Both captures served 1,000 requests in 10 s. Per request, `a` doubled (500 -> 1,000 samples), `b` did
//! not move (500) and `c` halved (100 -> 50). As shares, `b` looks like the second-biggest change
//! (45.5% -> 32.3%) only because `a` grew; per request `b` is unchanged and ranks last, `c` second.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, PERIOD, diff_json, num, profile, row, scratch, stack, write};

fn files(name: &str) -> Vec<std::ffi::OsString> {
    let dir = scratch(name);
    let base = write(
        &dir.join("base.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[
                stack("main;a", 500),
                stack("main;b", 500),
                stack("main;c", 100),
            ],
        ),
    );
    let new = write(
        &dir.join("new.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[
                stack("main;a", 1_000),
                stack("main;b", 500),
                stack("main;c", 50),
            ],
        ),
    );
    vec!["--base".into(), base.into(), "--new".into(), new.into()]
}

fn order(json: &serde_json::Value) -> Vec<&str> {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["function"].as_str().unwrap())
        .collect()
}

#[test]
fn shares_rank_the_unchanged_function_second() {
    let (json, _) = diff_json(files("per_request_shares"));
    assert_eq!(order(&json)[..3], ["a", "b", "c"], "{json}");
    assert!(
        row(&json, "a").1.get("base_per_request").is_none(),
        "no per-request fields without request counts"
    );
}

#[test]
fn per_request_ranks_the_unchanged_function_last() {
    let mut args = files("per_request");
    args.extend(["--base-requests", "1000", "--new-requests", "1000"].map(Into::into));
    let (json, stderr) = diff_json(args);
    assert_eq!(order(&json)[..3], ["a", "c", "b"], "{json}");
    let (_, a) = row(&json, "a");
    assert_eq!(num(a, "base_per_request"), (500 * PERIOD) as f64 / 1000.0);
    assert_eq!(num(a, "new_per_request"), (1_000 * PERIOD) as f64 / 1000.0);
    let (_, b) = row(&json, "b");
    assert_eq!(num(b, "delta_per_request"), 0.0, "{b}");
    assert!(
        num(b, "delta_self_pct") < -13.0,
        "the share still moves: {b}"
    );
    assert_eq!(json["normalisation"], "per_request");
    assert!(
        !stderr.contains("warning"),
        "matched captures need no warning: {stderr}"
    );
}

#[test]
fn per_request_accounts_for_different_load() {
    // The new capture served twice the requests with twice the samples everywhere: nothing changed per
    // request, and every per-request delta is zero even though the raw counts doubled.
    let dir = scratch("per_request_load");
    let base = write(
        &dir.join("b.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[stack("main;a", 300), stack("main;b", 700)],
        ),
    );
    let new = write(
        &dir.join("n.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[stack("main;a", 600), stack("main;b", 1_400)],
        ),
    );
    let (json, _) = diff_json([
        "--base".as_ref(),
        base.as_os_str(),
        "--new".as_ref(),
        new.as_os_str(),
        "--base-requests".as_ref(),
        "500".as_ref(),
        "--new-requests".as_ref(),
        "1000".as_ref(),
    ]);
    for r in json["rows"].as_array().unwrap() {
        assert_eq!(num(r, "delta_per_request"), 0.0, "{r}");
    }
}

#[test]
fn per_cpu_second_uses_capture_durations() {
    let mut args = files("per_second");
    args.push("--per-cpu-second".into());
    let (json, _) = diff_json(args);
    assert_eq!(order(&json)[..3], ["a", "c", "b"], "{json}");
    // 500 samples of 10 ms in 10 s: half a CPU, in nanoseconds per second.
    assert_eq!(num(row(&json, "a").1, "base_per_second"), 5e8);
    assert_eq!(num(row(&json, "a").1, "new_per_second"), 1e9);
}
