//! The systemd unit (deploy/systemd/sonde.service): `systemd-analyze verify` accepts it without a warning,
//! `systemd-analyze security --offline=yes` rates its exposure at most 4.0, it grants exactly
//! deploy/capabilities.txt to the unprivileged `sonde` user with the hardening the issue asks for, and every
//! system call and socket family of a real `sonde record` and `sonde run` is allowed by its
//! SystemCallFilter= and RestrictAddressFamilies= (systemd is not PID 1 here, so the unit cannot be started:
//! tests/deploy_package.rs runs the packaged binary as the `sonde` user with the unit's capabilities).

use crate::common;
use crate::common::caps;
use crate::common::deploy;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::{Command, Output},
};

use common::{FP_FLAGS, Workload, build_workload, require_root, root, temp_dir};
use deploy::{unit_values, unit_words};

fn unit_path() -> PathBuf {
    root().join("deploy/systemd/sonde.service")
}

fn unit() -> String {
    std::fs::read_to_string(unit_path()).unwrap()
}

/// A root directory for `systemd-analyze --root`: the host's own units (targets the unit refers to), the
/// unit under test and the sonde binary at its ExecStart path, /usr/bin/sonde (the host's is not touched).
fn analyze_root(name: &str, unit_text: &str) -> PathBuf {
    let dir = temp_dir(name).join("root");
    let system = dir.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&system).unwrap();
    for entry in std::fs::read_dir("/usr/lib/systemd/system").expect("systemd's units") {
        let entry = entry.unwrap();
        let to = system.join(entry.file_name());
        if entry.file_type().unwrap().is_file() && !to.exists() {
            std::fs::copy(entry.path(), to).unwrap();
        }
    }
    std::fs::create_dir_all(dir.join("etc/systemd/system")).unwrap();
    std::fs::write(dir.join("etc/systemd/system/sonde.service"), unit_text).unwrap();
    std::fs::create_dir_all(dir.join("usr/bin")).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_sonde"), dir.join("usr/bin/sonde")).unwrap();
    dir
}

fn systemd_analyze(root_dir: &Path, args: &[&str]) -> Output {
    Command::new("systemd-analyze")
        .args(args)
        .arg(format!("--root={}", root_dir.display()))
        .arg("sonde.service")
        .output()
        .expect("systemd-analyze (Debian package systemd) must be installed")
}

#[test]
fn verify_accepts_the_unit_without_a_warning() {
    let out = systemd_analyze(&analyze_root("systemd-verify", &unit()), &["verify"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{stderr}"
    );
    assert!(
        stderr.trim().is_empty(),
        "systemd-analyze verify warns:\n{stderr}"
    );

    // The negative control: a misspelt directive only warns (exit 0), which the check above must catch.
    let misspelt = unit().replace("NoNewPrivileges=yes", "NoNewPrivilege=yes");
    let out = systemd_analyze(
        &analyze_root("systemd-verify-negative", &misspelt),
        &["verify"],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NoNewPrivilege"),
        "a misspelt directive went unnoticed"
    );
}

#[test]
fn security_exposure_is_at_most_4() {
    let out = systemd_analyze(
        &analyze_root("systemd-security", &unit()),
        &["security", "--offline=yes", "--no-pager"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("unrecognized option"),
        "this systemd-analyze has no --offline: {stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("Overall exposure level for sonde.service"))
        .unwrap_or_else(|| panic!("no exposure level printed:\n{stdout}\n{stderr}"));
    let score: f64 = line
        .split(':')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the exposure of {line:?}"));
    eprintln!("{line}");
    assert!(score <= 4.0, "exposure {score} above 4.0:\n{stdout}");
}

#[test]
fn unit_grants_the_measured_capabilities_to_an_unprivileged_user_with_hardening() {
    let unit = unit();
    let caps: BTreeSet<String> = caps::canonical().into_iter().collect();
    assert!(
        !caps.contains("CAP_SYS_ADMIN"),
        "deploy/capabilities.txt grants CAP_SYS_ADMIN"
    );
    assert_eq!(unit_words(&unit, "AmbientCapabilities"), caps);
    assert_eq!(unit_words(&unit, "CapabilityBoundingSet"), caps);
    assert_eq!(unit_values(&unit, "User"), ["sonde"]);
    assert_eq!(unit_values(&unit, "Group"), ["sonde"]);
    let exec = unit_values(&unit, "ExecStart");
    assert_eq!(exec.len(), 1);
    assert!(
        exec[0].starts_with("/usr/bin/sonde run --config /etc/sonde/sonde.toml"),
        "{exec:?}"
    );
    // Every setting comes from the file.
    assert!(!exec[0].contains("--metrics-addr"), "{exec:?}");
    for (key, want) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "read-only"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectControlGroups", "yes"),
        ("ProtectKernelModules", "yes"),
        ("SystemCallArchitectures", "native"),
        ("LockPersonality", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
        ("RestrictNamespaces", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("StateDirectory", "sonde"),
        ("StateDirectoryMode", "0700"),
        ("CacheDirectory", "sonde"),
        ("CacheDirectoryMode", "0700"),
        ("Restart", "on-failure"),
    ] {
        assert_eq!(unit_values(&unit, key), [want], "{key}=");
    }
    // ProtectKernelTunables= would hide /proc/kallsyms (kernel frames); what else it protects is kept.
    assert!(unit_values(&unit, "ProtectKernelTunables").is_empty());
    // A `-` prefix only tolerates a path the kernel lacks.
    let read_only: Vec<String> = unit_words(&unit, "ReadOnlyPaths")
        .into_iter()
        .map(|p| p.trim_start_matches('-').to_owned())
        .collect();
    for path in ["/sys", "/proc/sys", "/proc/sysrq-trigger"] {
        assert!(
            read_only.iter().any(|p| p == path),
            "{path} is not read-only"
        );
    }
    // ProtectKernelLogs= drops CAP_SYSLOG (kernel addresses in /proc/kallsyms); the log stays hidden.
    if caps.contains("CAP_SYSLOG") {
        assert!(unit_values(&unit, "ProtectKernelLogs").is_empty());
        assert!(unit_words(&unit, "InaccessiblePaths").contains("-/proc/kmsg"));
    } else {
        assert_eq!(unit_values(&unit, "ProtectKernelLogs"), ["yes"]);
    }
    // Hiding processes would blind the profiler.
    for key in ["PrivateUsers", "ProtectProc", "ProcSubset", "DynamicUser"] {
        assert!(unit_values(&unit, key).is_empty(), "{key}= hides processes");
    }
    assert!(!unit_words(&unit, "RestrictAddressFamilies").is_empty());
}

#[test]
fn the_config_file_of_the_package_is_valid() {
    let path = root().join("deploy/systemd/sonde.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let config = sonde::config::DaemonConfig::merge(
        Some((&path, &text)),
        &sonde::config::RunArgs::default(),
        &|_| None,
    )
    .expect("sonde rejects deploy/systemd/sonde.toml");
    assert_eq!(
        config.data_dir,
        PathBuf::from("/var/lib/sonde"),
        "the unit's StateDirectory"
    );
    // Loopback only: the unit does not restrict IP addresses.
    assert_eq!(config.metrics_addr, Some("127.0.0.1:9464".parse().unwrap()));
}

/// Every system call name in `systemd-analyze syscall-filter`'s group `group`, nested groups expanded.
fn expand_group(groups: &BTreeMap<String, Vec<String>>, group: &str, into: &mut BTreeSet<String>) {
    for item in groups
        .get(group)
        .unwrap_or_else(|| panic!("unknown group {group}"))
    {
        if item.starts_with('@') {
            expand_group(groups, item, into);
        } else {
            into.insert(item.clone());
        }
    }
}

/// The system calls the unit's SystemCallFilter= allows (an allow list of groups and names).
fn allowed_syscalls(unit: &str) -> BTreeSet<String> {
    let out = Command::new("systemd-analyze")
        .args(["syscall-filter", "--no-pager"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let word = line.trim();
        if word.is_empty() || word.starts_with('#') {
            continue;
        }
        if !line.starts_with(' ') && word.starts_with('@') {
            current = Some(word.to_owned());
            groups.entry(word.to_owned()).or_default();
        } else if let Some(group) = &current {
            groups.get_mut(group).unwrap().push(word.to_owned());
        }
    }
    let mut allowed = BTreeSet::new();
    for item in unit_words(unit, "SystemCallFilter") {
        assert!(!item.starts_with('~'), "the filter is an allow list");
        if item.starts_with('@') {
            expand_group(&groups, &item, &mut allowed);
        } else {
            allowed.insert(item);
        }
    }
    allowed
}

/// System call names and socket families in an `strace -f` log.
fn traced(log: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut calls, mut families) = (BTreeSet::new(), BTreeSet::new());
    for line in log.lines() {
        // `1234  name(args...` (a call, possibly `<unfinished ...>`); `<... name resumed>` repeats one.
        let rest = line
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start();
        let Some((name, args)) = rest.split_once('(') else {
            continue;
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            continue;
        }
        calls.insert(name.to_owned());
        if name == "socket" {
            families.insert(args.split(',').next().unwrap().trim().to_owned());
        }
    }
    (calls, families)
}

/// Runs `sonde ARGS` under `strace -f`; returns the trace.
fn strace_sonde(dir: &Path, name: &str, args: &[&str]) -> String {
    let log = dir.join(format!("{name}.strace"));
    let out = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .arg(env!("CARGO_BIN_EXE_sonde"))
        .args(args)
        .env("SONDE_LOG", "warn")
        .output()
        .expect("strace (cargo xtask setup --peers) must be installed");
    assert!(
        out.status.success(),
        "sonde {args:?} under strace failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(log).unwrap()
}

#[test]
fn every_system_call_and_socket_family_of_a_real_run_is_allowed_by_the_unit() {
    require_root();
    let unit = unit();
    let allowed = allowed_syscalls(&unit);
    for needed in ["bpf", "perf_event_open", "read", "openat", "mmap"] {
        assert!(allowed.contains(needed), "the filter refuses {needed}");
    }
    let families = unit_words(&unit, "RestrictAddressFamilies");

    let dir = temp_dir("systemd-syscalls");
    let bin = build_workload("cpu_split", "cpu_split_syscalls", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid().to_string();
    let output = dir.join("cpu.pb.gz");
    let mut log = strace_sonde(
        &dir,
        "record",
        &[
            "record",
            "--duration",
            "2",
            "--pid",
            &pid,
            "--output",
            output.to_str().unwrap(),
        ],
    );
    let offcpu = dir.join("offcpu.pb.gz");
    log += &strace_sonde(
        &dir,
        "record-offcpu",
        &[
            "record",
            "--profile",
            "offcpu",
            "--duration",
            "2",
            "--output",
            offcpu.to_str().unwrap(),
        ],
    );
    // The daemon as the unit starts it: config file, local data directory, metrics endpoint on loopback
    // (port 0: any free one, so a running agent does not collide).
    let data = dir.join("data");
    log += &strace_sonde(
        &dir,
        "run",
        &[
            "run",
            "--config",
            root().join("deploy/systemd/sonde.toml").to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--export-interval",
            "1",
            "--duration",
            "3",
            "--offcpu",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    drop(workload);
    let (calls, socket_families) = traced(&log);
    eprintln!(
        "{} system calls: {calls:?}\nsocket families: {socket_families:?}",
        calls.len()
    );
    assert!(
        calls.contains("bpf") && calls.contains("perf_event_open"),
        "{calls:?}"
    );
    // sonde's own execve comes before the unit's filter would apply (systemd installs it, then execs).
    let refused: Vec<&String> = calls
        .iter()
        .filter(|c| !allowed.contains(*c) && c.as_str() != "execve")
        .collect();
    assert!(
        refused.is_empty(),
        "SystemCallFilter= would refuse {refused:?}"
    );
    let refused: Vec<&String> = socket_families
        .iter()
        .filter(|f| !families.contains(*f))
        .collect();
    assert!(
        refused.is_empty(),
        "RestrictAddressFamilies= would refuse {refused:?}"
    );
}
