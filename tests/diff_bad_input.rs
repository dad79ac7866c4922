//! Bad input: each case is one clear `sonde: error:` line and exit status 1.

use crate::common::diff_fixtures as fixtures;

use std::path::{Path, PathBuf};

use fixtures::{Kind, gzip, profile, scratch, sonde_diff, stack, write};
use prost::Message as _;

fn good(dir: &Path) -> PathBuf {
    write(
        &dir.join("good.pb.gz"),
        &profile(Kind::Cpu, 10.0, &[stack("main;work", 100)]),
    )
}

/// Runs `sonde diff` and asserts it failed with exit status 1 and an error line containing `expected`.
fn fails_with(args: &[&std::ffi::OsStr], expected: &[&str]) {
    let out = sonde_diff(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "args {args:?}: {stderr}");
    assert!(stderr.starts_with("sonde: error: "), "{stderr}");
    for e in expected {
        assert!(stderr.contains(e), "expected {e:?} in: {stderr}");
    }
    assert!(out.stdout.is_empty(), "no table on error");
}

fn fails_as_new(name: &str, bytes: &[u8], expected: &[&str]) {
    let dir = scratch(name);
    let bad = dir.join("bad.pb.gz");
    std::fs::write(&bad, bytes).unwrap();
    let good = good(&dir);
    fails_with(
        &[
            "--base".as_ref(),
            good.as_os_str(),
            "--new".as_ref(),
            bad.as_os_str(),
        ],
        expected,
    );
}

#[test]
fn missing_file() {
    let dir = scratch("bad_missing");
    let good = good(&dir);
    let missing = dir.join("nope.pb.gz");
    fails_with(
        &[
            "--base".as_ref(),
            missing.as_os_str(),
            "--new".as_ref(),
            good.as_os_str(),
        ],
        &["cannot read", "nope.pb.gz", "No such file"],
    );
}

#[test]
fn corrupt_gzip() {
    let bytes = gzip(&profile(Kind::Cpu, 10.0, &[stack("main;work", 100)]).encode_to_vec());
    fails_as_new(
        "bad_truncated_gzip",
        &bytes[..bytes.len() / 2],
        &["corrupt or truncated gzip", "bad.pb.gz"],
    );
    let mut flipped = bytes.clone();
    for b in &mut flipped[12..bytes.len() - 8] {
        *b ^= 0x5a;
    }
    fails_as_new("bad_flipped_gzip", &flipped, &["corrupt or truncated gzip"]);
}

#[test]
fn not_gzip() {
    fails_as_new(
        "bad_not_gzip",
        b"main;work 100\n",
        &["is not gzip-compressed"],
    );
}

#[test]
fn gzip_of_bytes_that_are_not_a_pprof() {
    fails_as_new(
        "bad_not_pprof",
        &gzip(b"<html>this is not a profile</html>"),
        &["is not a pprof profile"],
    );
}

#[test]
fn empty_profiles() {
    fails_as_new("bad_empty_bytes", &gzip(b""), &["empty profile"]);
    let no_samples = profile(Kind::Cpu, 10.0, &[]);
    fails_as_new(
        "bad_no_samples",
        &gzip(&no_samples.encode_to_vec()),
        &["empty profile (no samples)"],
    );
}

#[test]
fn mismatched_sample_types() {
    let dir = scratch("bad_mismatch");
    let cpu = good(&dir);
    let off = write(
        &dir.join("off.pb.gz"),
        &profile(Kind::OffCpu, 10.0, &[stack("main;wait", 100)]),
    );
    fails_with(
        &[
            "--base".as_ref(),
            cpu.as_os_str(),
            "--new".as_ref(),
            off.as_os_str(),
        ],
        &[
            "sample types differ",
            "cpu/nanoseconds",
            "offcpu/nanoseconds",
            "--sample-type",
        ],
    );
    fails_with(
        &[
            "--base".as_ref(),
            cpu.as_os_str(),
            "--new".as_ref(),
            cpu.as_os_str(),
            "--sample-type".as_ref(),
            "alloc".as_ref(),
        ],
        &["no sample type `alloc`", "samples/count, cpu/nanoseconds"],
    );
}

fn data_dir(name: &str, index: &str) -> PathBuf {
    let dir = scratch(name);
    good(&dir);
    std::fs::write(dir.join("index.jsonl"), index).unwrap();
    dir
}

const ENTRY: &str = r#"{"path":"good.pb.gz","kind":"cpu","start_unix_nanos":0,"end_unix_nanos":10000000000,"tags":{"service.name":"checkout","service.version":"2.3"}}"#;

#[test]
fn selector_that_matches_nothing() {
    let dir = data_dir("bad_selector", &format!("{ENTRY}\n"));
    fails_with(
        &[
            "--data".as_ref(),
            dir.as_os_str(),
            "--base".as_ref(),
            "version=2.3".as_ref(),
            "--new".as_ref(),
            "version=9.9".as_ref(),
        ],
        &["no cpu profile", "new selectors version=9.9"],
    );
    fails_with(
        &[
            "--data".as_ref(),
            dir.as_os_str(),
            "--base".as_ref(),
            "version=2.3".as_ref(),
            "--new".as_ref(),
            "version=2.3".as_ref(),
            "--since".as_ref(),
            "2026-01-01T00:00:00Z".as_ref(),
        ],
        &["none falls in the --since/--until window"],
    );
    fails_with(
        &[
            "--data".as_ref(),
            dir.as_os_str(),
            "--base".as_ref(),
            "version".as_ref(),
            "--new".as_ref(),
            "version=2.3".as_ref(),
        ],
        &["selector `version` is not KEY=VALUE"],
    );
}

/// A line that is not an entry, a torn last line (a crash mid-append) and a line whose file is gone are
/// skipped with a warning each; `--strict` refuses the directory at the first.
#[test]
fn broken_index() {
    let gone = ENTRY.replace("good.pb.gz", "pruned.pb.gz");
    let dir = data_dir(
        "bad_index",
        &format!("{ENTRY}\nnot json\n{gone}\n{{\"path\":\"prof"),
    );
    let args = [
        "--data".as_ref(),
        dir.as_os_str(),
        "--base".as_ref(),
        "version=2.3".as_ref(),
        "--new".as_ref(),
        "version=2.3".as_ref(),
    ];
    let out = sonde_diff(&args[..]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for expected in [
        "index.jsonl line 2: skipped",
        "index.jsonl line 3: skipped (file \"pruned.pb.gz\"",
        "index.jsonl line 4: skipped",
        "3 index line(s) skipped",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in: {stderr}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("work"));
    let mut strict = args.to_vec();
    strict.push("--strict".as_ref());
    fails_with(&strict, &["index.jsonl line 2"]);
    let empty = scratch("bad_no_index");
    fails_with(
        &[
            "--data".as_ref(),
            empty.as_os_str(),
            "--base".as_ref(),
            "version=2.3".as_ref(),
            "--new".as_ref(),
            "version=2.3".as_ref(),
        ],
        &["index.jsonl", "sonde run"],
    );
}
