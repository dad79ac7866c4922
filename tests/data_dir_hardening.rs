//! The data-directory attacks of issue 14 against the real daemon: a planted directory symlink, a planted
//! temporary-file symlink to a root-owned 0600 file, a data directory of another user, a world-writable
//! one, and a symlinked debuginfod cache. Each is refused at start with a one-line error, or harmless
//! (the target unchanged, the failure visible); what sonde writes is 0600/0700 under umask 022.

use crate::common;

use std::{
    os::unix::{
        fs::{MetadataExt as _, PermissionsExt as _, symlink},
        process::CommandExt as _,
    },
    path::Path,
    process::Command,
    time::{SystemTime, UNIX_EPOCH},
};

use common::*;

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn private_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    set_mode(path, 0o700);
}

/// `sonde run` on `data` must stop before loading anything, with one error line containing `expect`.
fn assert_refused(data: &Path, expect: &str) {
    let out = sonde(&[
        "run",
        "--duration",
        "2",
        "--metrics-addr",
        "none",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{} accepted:\n{stderr}",
        data.display()
    );
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("sonde: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line:\n{stderr}");
    assert!(errors[0].contains(expect), "{expect:?} not in:\n{stderr}");
    assert!(
        !stderr.contains("sonde running"),
        "refused before starting:\n{stderr}"
    );
}

#[test]
fn unsafe_data_directories_are_refused_at_start() {
    require_root();
    let dir = temp_dir("hardening_refused");
    let elsewhere = dir.join("elsewhere");
    private_dir(&elsewhere);

    let linked = dir.join("linked");
    symlink(&elsewhere, &linked).unwrap();
    assert_refused(&linked, "is a symbolic link");

    let planted = dir.join("planted");
    private_dir(&planted);
    symlink(&elsewhere, planted.join("profiles")).unwrap();
    assert_refused(&planted, "profiles is a symbolic link");

    let theirs = dir.join("theirs");
    private_dir(&theirs);
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    assert_refused(&theirs, "belongs to uid 65534");

    let open = dir.join("open");
    private_dir(&open);
    set_mode(&open, 0o777);
    assert_refused(&open, "writable by group and others");
    assert_eq!(
        std::fs::metadata(&open).unwrap().mode() & 0o777,
        0o777,
        "left as it was"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written through a link"
    );

    let out = sonde(&["run", "--data-mode", "0666", "--duration", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no write or execute bits for group"));
}

#[test]
fn a_symlinked_debuginfod_cache_is_refused() {
    require_root();
    let dir = temp_dir("hardening_cache");
    let elsewhere = dir.join("elsewhere");
    private_dir(&elsewhere);
    let cache = dir.join("cache");
    symlink(&elsewhere, &cache).unwrap();
    let out = sonde(&[
        "record",
        "--duration",
        "1",
        "--debuginfod-urls",
        "http://127.0.0.1:9",
        "--debuginfod-cache-dir",
        cache.to_str().unwrap(),
        "--output",
        dir.join("out.pb.gz").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("debuginfod cache") && stderr.contains("is a symbolic link"),
        "{stderr}"
    );
}

/// Links planted where sonde will write: for every other future window directory, and under the old
/// temporary name of the index. The windows that meet a link are refused (and say so), the others are
/// written, and the root-owned 0600 victim keeps its bytes. Modes hold under umask 022.
#[test]
fn planted_links_are_harmless_and_modes_ignore_the_umask() {
    require_root();
    let dir = temp_dir("hardening_planted");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"root only").unwrap();
    set_mode(&victim, 0o600);
    let elsewhere = dir.join("elsewhere");
    private_dir(&elsewhere);
    let data = dir.join("data");
    private_dir(&data.join("profiles"));
    symlink(&victim, data.join(".index.jsonl.tmp")).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for second in (now..now + 60).filter(|s| s % 2 == 0) {
        symlink(&elsewhere, data.join(format!("profiles/{second}"))).unwrap();
    }
    let bin = build_workload("cpu_split", "cpu_split_hardening", FP_FLAGS);
    let _workload = Workload::start(&bin, &["30"]);

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sonde"));
    cmd.args([
        "run",
        "--export-interval",
        "1",
        "--duration",
        "6",
        "--metrics-addr",
        "none",
        "--data-dir",
        data.to_str().unwrap(),
    ])
    .env("SONDE_LOG", "warn");
    // SAFETY: umask is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        })
    };
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a symbolic link"),
        "refused windows are visible:\n{stderr}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"root only");
    assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(
        !data.join(".index.jsonl.tmp").exists(),
        "the planted temporary link was removed at start"
    );

    let index = std::fs::read_to_string(data.join("index.jsonl")).expect("some windows written");
    assert!(index.lines().count() > 0);
    let mut checked = 0;
    let mut stack = vec![data.clone()];
    while let Some(d) = stack.pop() {
        assert_eq!(
            std::fs::metadata(&d).unwrap().mode() & 0o777,
            0o700,
            "{}",
            d.display()
        );
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                continue; // the planted window links, left alone
            }
            if meta.is_dir() {
                stack.push(path);
            } else {
                assert_eq!(meta.mode() & 0o777, 0o600, "{}", path.display());
                checked += 1;
            }
        }
    }
    assert!(checked > 1, "profiles and the index were checked");
}
