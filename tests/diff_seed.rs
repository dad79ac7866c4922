//! The differential table from the seed article (001_*), rebuilt as two synthetic captures of one service:
//! v2.3 for 100 s, v2.4 for 500 s (five times longer). The regression (`scoring.normalizeWeights`,
//! 2.1% -> 9.4%) must rank first with +7.3 points; `json.serialize` (15.2% -> 15.0%) is prominent but
//! unchanged and must not rank near the top. Also covers the release gate on the same data.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, diff_json, num, profile, row, scratch, sonde_diff, stack, write};

/// `(function, v2.3 samples of 10,000, v2.4 samples of 50,000)`; ten `work.stepN` fill the rest.
const TABLE: &[(&str, i64, i64)] = &[
    ("scoring.normalizeWeights", 210, 4_700),
    ("json.serialize", 1_520, 7_500),
    ("auth.verifyToken", 1_040, 5_050),
    ("log.write", 530, 2_700),
    ("(gc)", 400, 3_900),
];

fn stacks(version_index: usize) -> Vec<fixtures::Stack> {
    let mut out: Vec<_> = TABLE
        .iter()
        .map(|&(f, base, new)| {
            let n = if version_index == 0 { base } else { new };
            match f {
                "(gc)" => stack("runtime.gcBgMarkWorker;(gc)", n),
                "scoring.normalizeWeights" => stack(
                    "main;server.handle;scoring.score;scoring.normalizeWeights",
                    n,
                ),
                _ => stack(&format!("main;server.handle;{f}"), n),
            }
        })
        .collect();
    for i in 0..10 {
        let n = if version_index == 0 { 630 } else { 2_615 };
        out.push(stack(&format!("main;server.handle;work.step{i}"), n));
    }
    out
}

fn seed_files(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = scratch(name);
    let base = write(
        &dir.join("v2.3.pb.gz"),
        &profile(Kind::Cpu, 100.0, &stacks(0)),
    );
    let new = write(
        &dir.join("v2.4.pb.gz"),
        &profile(Kind::Cpu, 500.0, &stacks(1)),
    );
    (base, new)
}

#[test]
fn regression_ranks_first_and_prominent_unchanged_function_does_not() {
    let (base, new) = seed_files("seed_rank");
    let (json, stderr) = diff_json([
        "--base".as_ref(),
        base.as_os_str(),
        "--new".as_ref(),
        new.as_os_str(),
    ]);

    let (rank, regression) = row(&json, "scoring.normalizeWeights");
    assert_eq!(rank, 0, "the regression must rank first: {json}");
    assert!(
        (num(regression, "base_self_pct") - 2.1).abs() < 1e-9,
        "{regression}"
    );
    assert!(
        (num(regression, "new_self_pct") - 9.4).abs() < 1e-9,
        "{regression}"
    );
    assert!(
        (num(regression, "delta_self_pct") - 7.3).abs() < 1e-9,
        "{regression}"
    );
    assert_eq!(regression["within_noise"], false);

    let (rank, gc) = row(&json, "(gc)");
    assert_eq!(rank, 1, "the secondary effect ranks second: {json}");
    assert!((num(gc, "delta_self_pct") - 3.8).abs() < 1e-9);

    let (rank, serialize) = row(&json, "json.serialize");
    assert!(
        rank >= 10,
        "json.serialize is unchanged but ranked {rank}: {json}"
    );
    assert!((num(serialize, "delta_self_pct") + 0.2).abs() < 1e-9);
    assert_eq!(
        serialize["within_noise"], true,
        "-0.2 points on 10,000 samples is noise: {serialize}"
    );
    assert!((num(serialize, "base_self_pct") - 15.2).abs() < 1e-9);

    // Total share: server.handle holds everything but the GC.
    let (_, handle) = row(&json, "server.handle");
    assert!(
        (num(handle, "base_total_pct") - 96.0).abs() < 1e-9,
        "{handle}"
    );
    assert!(
        (num(handle, "new_total_pct") - 92.2).abs() < 1e-9,
        "{handle}"
    );
    assert!(
        (num(handle, "delta_total_pct") + 3.8).abs() < 1e-9,
        "{handle}"
    );
    assert_eq!(num(handle, "base_self_pct"), 0.0);

    assert_eq!(json["totals"]["base"]["samples"], 10_000.0);
    assert_eq!(json["totals"]["new"]["samples"], 50_000.0);
    assert!(
        stderr.contains("capture durations differ"),
        "a 100 s vs 500 s comparison without request counts must warn: {stderr}"
    );
}

#[test]
fn table_lists_the_regression_first() {
    let (base, new) = seed_files("seed_table");
    let out = sonde_diff([
        "--base".as_ref(),
        base.as_os_str(),
        "--new".as_ref(),
        new.as_os_str(),
    ]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first_row = stdout.lines().nth(2).unwrap();
    assert!(
        first_row.contains("scoring.normalizeWeights") && first_row.contains("+7.30"),
        "{stdout}"
    );
    let serialize = stdout
        .lines()
        .find(|l| l.ends_with(" json.serialize"))
        .unwrap();
    assert!(
        serialize.contains("noise"),
        "json.serialize must be marked as noise: {serialize}"
    );
}

#[test]
fn release_gate_names_only_the_functions_above_the_threshold() {
    let (base, new) = seed_files("seed_gate");
    let args = |pct: &str| {
        sonde_diff([
            "--base".as_ref(),
            base.as_os_str(),
            "--new".as_ref(),
            new.as_os_str(),
            "--fail-above".as_ref(),
            pct.as_ref(),
        ])
    };
    let out = args("5");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("scoring.normalizeWeights"), "{stderr}");
    assert!(
        !stderr.contains("(gc)"),
        "(gc) grew 3.8 points, under the 5-point gate: {stderr}"
    );

    let out = args("3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr.contains("(gc)") && stderr.contains("2 function(s)"),
        "{stderr}"
    );

    // 7.3 points minus a 2-sigma margin of about 0.4 is under 7: the gate holds.
    let out = args("7");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn several_files_on_one_side_are_merged() {
    let dir = scratch("seed_merge");
    let (base, new) = seed_files("seed_merge_whole");
    // v2.4 split into two captures of 250 s, each with about half of every stack's samples.
    let half = |s: &fixtures::Stack, first: bool| {
        let n = if first {
            s.samples / 2
        } else {
            s.samples - s.samples / 2
        };
        stack(&s.frames, n)
    };
    let (a, b): (Vec<_>, Vec<_>) = stacks(1)
        .iter()
        .map(|s| (half(s, true), half(s, false)))
        .unzip();
    let first = write(&dir.join("v2.4-a.pb.gz"), &profile(Kind::Cpu, 250.0, &a));
    let second = write(&dir.join("v2.4-b.pb.gz"), &profile(Kind::Cpu, 250.0, &b));
    let args = |new: &[&std::path::Path]| {
        let mut a: Vec<std::ffi::OsString> =
            vec!["--base".into(), base.clone().into(), "--new".into()];
        a.extend(new.iter().map(|p| p.as_os_str().to_owned()));
        a.push("--per-cpu-second".into());
        diff_json(a).0
    };
    let merged = args(&[&first, &second]);
    let whole = args(&[&new]);
    assert_eq!(merged["totals"]["new"]["files"], 2);
    assert_eq!(merged["totals"]["new"]["duration_seconds"], 500.0);
    assert_eq!(
        merged["rows"], whole["rows"],
        "two halves merge into the whole capture"
    );
}
