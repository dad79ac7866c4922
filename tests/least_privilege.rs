//! Least privilege, measured: as a non-root user holding exactly the capabilities of
//! `deploy/capabilities.txt`, `sonde record` (cpu and offcpu) and `sonde run` profile workloads started
//! by root and name as many of their frames as a root run; removing each capability gives the error (or,
//! for those that only cost names, the warning) that names it; with tracefs unmounted and no
//! CAP_SYS_ADMIN the error says what to mount; a binary deleted after its process started is named only
//! with CAP_CHECKPOINT_RESTORE (`/proc/PID/map_files`), and otherwise counted and warned about.

use crate::common;
use crate::common::caps;

use std::{path::Path, process::Command, time::Duration};

use caps::*;
use common::*;

/// Share of the frames of `pid`'s samples that have a name, weighted by value `index`.
fn named_share(samples: &[Resolved], pid: u32, index: usize) -> f64 {
    let (mut all, mut named) = (0i64, 0i64);
    for s in samples.iter().filter(|s| s.pid == i64::from(pid)) {
        all += s.values[index] * s.functions.len() as i64;
        named += s.values[index] * s.functions.iter().filter(|f| *f != "?").count() as i64;
    }
    assert!(all > 0, "no frames for pid {pid}");
    named as f64 / all as f64
}

/// `sonde record` arguments for `pid`.
fn record_args<'a>(
    pid: &'a str,
    seconds: &'a str,
    out: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["record", "--duration", seconds, "--pid", pid];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--output", out]);
    args
}

/// Root's reference recording of the same workload, with the same arguments.
fn root_record(pid: u32, seconds: &str, extra: &[&str], out: &Path) -> Vec<Resolved> {
    record_pid(pid, seconds, extra, out);
    resolve(&read_pprof(out))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn record_cpu_with_exactly_the_documented_capabilities_names_frames_as_root_does() {
    require_root();
    let sandbox = Sandbox::new("cpu");
    let caps = canonical();
    let bin = build_workload("cpu_split", "lp_cpu_split", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid().to_string();
    std::thread::sleep(Duration::from_millis(300));

    let out = sandbox.out("cpu.pb.gz");
    let run = sandbox.sonde(&caps, &record_args(&pid, "4", &out, &[]));
    let summary = ok(&run, "record cpu with the canonical capabilities");
    let warnings = stderr(&run);
    let root = root_record(
        workload.pid(),
        "4",
        &[],
        &temp_dir("lp_cpu").join("root.pb.gz"),
    );
    drop(workload);

    let samples = resolve(&read_pprof(Path::new(&out)));
    let pid = pid.parse().unwrap();
    let (mine, roots) = (named_share(&samples, pid, 0), named_share(&root, pid, 0));
    eprintln!(
        "named frames: least privilege {:.1}%, root {:.1}%\n{summary}\n{warnings}",
        100.0 * mine,
        100.0 * roots
    );
    let all = total(&samples, pid, 0) as f64;
    for (function, want) in [
        ("burn_fifty", 50.0),
        ("burn_thirty", 30.0),
        ("burn_twenty", 20.0),
    ] {
        let got = 100.0 * inclusive(&samples, pid, function, 0) as f64 / all;
        assert!(
            (got - want).abs() <= 10.0,
            "{function}: {got:.1}% of {all} samples, expected {want}±10"
        );
    }
    assert!(
        mine > 0.9 && mine >= roots - 0.05,
        "least privilege names {:.1}% of the frames, root {:.1}%",
        100.0 * mine,
        100.0 * roots
    );
    // Every capability that only costs names was granted: nothing to warn about.
    for cap in ["CAP_CHECKPOINT_RESTORE", "CAP_SYSLOG", "CAP_SYS_PTRACE"] {
        assert!(!warnings.contains(cap), "{cap} named:\n{warnings}");
    }
}

#[test]
fn record_offcpu_with_exactly_the_documented_capabilities_names_the_sleeps() {
    require_root();
    let sandbox = Sandbox::new("offcpu");
    let caps = canonical();
    let bin = build_workload("offcpu_sleep", "lp_offcpu_sleep", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid().to_string();
    std::thread::sleep(Duration::from_millis(300));

    let out = sandbox.out("offcpu.pb.gz");
    let extra = ["--profile", "offcpu"];
    let run = sandbox.sonde(&caps, &record_args(&pid, "4", &out, &extra));
    let summary = ok(&run, "record offcpu with the canonical capabilities");
    let root = root_record(
        workload.pid(),
        "4",
        &extra,
        &temp_dir("lp_offcpu").join("root.pb.gz"),
    );
    drop(workload);

    let samples = resolve(&read_pprof(Path::new(&out)));
    let pid = pid.parse().unwrap();
    assert_sleep_split(&samples, pid, &summary);
    // The kernel's sleep path is named too (by the kernel itself; before Linux 5.13 from kallsyms,
    // with CAP_SYSLOG where it hides addresses).
    assert!(
        samples.iter().filter(|s| s.pid == i64::from(pid)).any(|s| s
            .functions
            .iter()
            .zip(&s.kernel)
            .any(|(f, k)| *k && f.contains("schedule"))),
        "no named kernel sleep path"
    );
    let (mine, roots) = (named_share(&samples, pid, 0), named_share(&root, pid, 0));
    eprintln!(
        "named frames (off-CPU time): least privilege {:.1}%, root {:.1}%",
        100.0 * mine,
        100.0 * roots
    );
    assert!(
        mine > 0.9 && mine >= roots - 0.05,
        "least privilege names {:.1}%, root {:.1}%",
        100.0 * mine,
        100.0 * roots
    );
}

/// The samples of `pid` in a `sonde run` data directory.
fn run_samples(data: &Path, pid: u32) -> Vec<Resolved> {
    let index = std::fs::read_to_string(data.join("index.jsonl"))
        .unwrap_or_else(|e| panic!("no index in {}: {e}", data.display()));
    let samples: Vec<Resolved> = index
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["tags"]["process.pid"] == serde_json::json!(pid.to_string()))
        .flat_map(|e| resolve(&read_indexed(data, &e)))
        .collect();
    assert!(!samples.is_empty(), "no profile of pid {pid}:\n{index}");
    samples
}

#[test]
fn run_with_exactly_the_documented_capabilities_names_frames_as_root_does() {
    require_root();
    let sandbox = Sandbox::new("run");
    let caps = canonical();
    let bin = build_workload("cpu_split", "lp_run_cpu_split", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid();
    let args = |data: &str| {
        [
            "run",
            "--duration",
            "4",
            "--export-interval",
            "2",
            "--metrics-addr",
            "none",
            "--data-dir",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([data.to_owned()])
        .collect::<Vec<String>>()
    };
    let data = sandbox.out("run");
    let run = sandbox.sonde(
        &caps,
        &args(&data).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    ok(&run, "sonde run with the canonical capabilities");
    let root_data = temp_dir("lp_run").join("data");
    let root_args = args(root_data.to_str().unwrap());
    sonde_ok(&root_args.iter().map(String::as_str).collect::<Vec<_>>());
    drop(workload);

    let samples = run_samples(Path::new(&data), pid);
    let root = run_samples(&root_data, pid);
    let (mine, roots) = (named_share(&samples, pid, 0), named_share(&root, pid, 0));
    eprintln!(
        "sonde run, named frames: least privilege {:.1}%, root {:.1}%\n{}",
        100.0 * mine,
        100.0 * roots,
        stderr(&run)
    );
    assert!(total(&samples, pid, 0) > 100, "about 4 s x 99 Hz expected");
    assert!(inclusive(&samples, pid, "burn_fifty", 0) > 0);
    assert!(
        mine > 0.9 && mine >= roots - 0.05,
        "least privilege names {:.1}%, root {:.1}%",
        100.0 * mine,
        100.0 * roots
    );
}

#[test]
fn a_deleted_binary_is_named_with_checkpoint_restore_and_counted_and_warned_about_without() {
    require_root();
    let sandbox = Sandbox::new("deleted");
    let caps = canonical();
    // The binary is deleted once its process runs, as a package upgrade replaces one.
    let built = build_workload("cpu_split", "lp_deleted_src", FP_FLAGS);
    let bin = temp_dir("lp_deleted").join("lp_deleted");
    std::fs::copy(&built, &bin).unwrap();
    let workload = Workload::start(&bin, &["60"]);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(&bin).unwrap();
    let pid = workload.pid().to_string();

    let full_out = sandbox.out("full.pb.gz");
    let full = sandbox.sonde(&caps, &record_args(&pid, "3", &full_out, &[]));
    ok(&full, "record with the canonical capabilities");
    let less = without(&caps, "CAP_CHECKPOINT_RESTORE");
    let less_out = sandbox.out("less.pb.gz");
    let degraded = sandbox.sonde(&less, &record_args(&pid, "3", &less_out, &[]));
    let summary = ok(&degraded, "record without CAP_CHECKPOINT_RESTORE");
    let root = root_record(
        workload.pid(),
        "3",
        &[],
        &temp_dir("lp_deleted").join("root.pb.gz"),
    );
    drop(workload);

    let pid: u32 = pid.parse().unwrap();
    let with_cap = resolve(&read_pprof(Path::new(&full_out)));
    let without_cap = resolve(&read_pprof(Path::new(&less_out)));
    let shares = [&with_cap, &without_cap, &root].map(|s| named_share(s, pid, 0));
    eprintln!(
        "deleted binary, named frames: canonical {:.1}%, without CAP_CHECKPOINT_RESTORE {:.1}%, root {:.1}%",
        100.0 * shares[0],
        100.0 * shares[1],
        100.0 * shares[2]
    );
    assert!(
        shares[0] > 0.9 && shares[0] >= shares[2] - 0.05,
        "{shares:?}"
    );
    assert!(inclusive(&with_cap, pid, "burn_fifty", 0) > 0);
    // Without it: the binary's own frames stay unnamed, and that is said, not silent.
    assert_eq!(inclusive(&without_cap, pid, "burn_fifty", 0), 0);
    assert!(shares[1] < shares[0] - 0.2, "{shares:?}");
    let warnings = stderr(&degraded);
    let warning = warnings
        .lines()
        .find(|l| l.contains("WARN") && l.contains("lp_deleted") && l.contains(&pid.to_string()))
        .unwrap_or_else(|| panic!("no warning naming the binary and the process:\n{warnings}"));
    for words in [
        "CAP_CHECKPOINT_RESTORE",
        "deleted",
        "sonde_processes_unreadable_total",
    ] {
        assert!(warning.contains(words), "{words} not in: {warning}");
    }
    assert!(
        summary.contains("(unreadable file)"),
        "the summary names the unreadable binary:\n{summary}"
    );
}

#[test]
fn removing_each_capability_names_it() {
    require_root();
    let sandbox = Sandbox::new("remove");
    let caps = canonical();
    let bin = build_workload("syscall_heavy", "lp_syscall_heavy", FP_FLAGS);
    let workload = Workload::start(&bin, &["120"]);
    let pid = workload.pid().to_string();
    let kallsyms_hidden = kallsyms_hidden_from_user();
    for cap in &caps {
        let out = sandbox.out("removed.pb.gz");
        let run = sandbox.sonde(&without(&caps, cap), &record_args(&pid, "2", &out, &[]));
        let what = format!("record without {cap}");
        match cap.as_str() {
            // Needed to load or to read anything: a one-line error naming it.
            "CAP_BPF" | "CAP_PERFMON" | "CAP_SYS_PTRACE" | "CAP_DAC_READ_SEARCH" => {
                let line = error_line(&run, &what);
                eprintln!("{what}: {line}");
                assert!(
                    line.contains(&format!("needs {cap}"))
                        || line.contains(&format!("missing {cap}")),
                    "{line}"
                );
            }
            // Only names are lost: the recording works, and a warning names it.
            "CAP_CHECKPOINT_RESTORE" => {
                ok(&run, &what);
                let warnings = stderr(&run);
                assert!(
                    warnings
                        .lines()
                        .any(|l| l.contains("WARN") && l.contains(cap.as_str())),
                    "{what}: no warning naming it:\n{warnings}"
                );
            }
            "CAP_SYSLOG" => {
                ok(&run, &what);
                let warnings = stderr(&run);
                let named = warnings
                    .lines()
                    .any(|l| l.contains("WARN") && l.contains(cap.as_str()));
                let samples = resolve(&read_pprof(Path::new(&out)));
                let pid: u32 = pid.parse().unwrap();
                let kernel_named = samples.iter().filter(|s| s.pid == i64::from(pid)).any(|s| {
                    s.functions
                        .iter()
                        .zip(&s.kernel)
                        .any(|(f, k)| *k && f != "?")
                });
                eprintln!(
                    "{what}: kallsyms hidden {kallsyms_hidden}, kernel frames named {kernel_named}"
                );
                // The kernel names its frames itself (bpf_snprintf's %ps, Linux 5.13+: this
                // host's kernel), whatever kallsyms hides: no name is lost, so no warning.
                assert!(
                    !named,
                    "{what}: warned although the kernel names its frames itself:\n{warnings}"
                );
                assert!(kernel_named, "{what}: kallsyms hidden {kallsyms_hidden}");
            }
            other => panic!(
                "{other} is in deploy/capabilities.txt but this test has no expectation for it: add one"
            ),
        }
    }
    // With every capability the kernel frames of the syscall are named.
    let out = sandbox.out("all.pb.gz");
    ok(
        &sandbox.sonde(&caps, &record_args(&pid, "2", &out, &[])),
        "record with all",
    );
    drop(workload);
    let samples = resolve(&read_pprof(Path::new(&out)));
    let pid: u32 = pid.parse().unwrap();
    assert!(
        samples.iter().filter(|s| s.pid == i64::from(pid)).any(|s| s
            .functions
            .iter()
            .zip(&s.kernel)
            .any(|(f, k)| *k && (f.contains("sys_read") || f.contains("read_zero")))),
        "no named kernel read path with every capability"
    );
}

/// `sh -c SCRIPT` in a private mount namespace with tracefs (and debugfs) unmounted in it.
fn without_tracefs(script: &str) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"]).arg(format!(
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; \
         umount /sys/kernel/debug 2>/dev/null; \
         if grep -q ' tracefs ' /proc/self/mounts; then echo 'tracefs still mounted' >&2; exit 97; fi; \
         {script}"
    ));
    cmd
}

#[test]
fn tracefs_unmounted_without_sys_admin_says_what_to_mount() {
    require_root();
    let sandbox = Sandbox::new("tracefs");
    let caps = canonical();
    let bin = build_workload("cpu_split", "lp_tracefs_cpu_split", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid().to_string();
    let out = sandbox.out("t.pb.gz");
    let script = |caps: &[String]| {
        let cmd = sandbox.command(caps, &record_args(&pid, "1", &out, &[]));
        std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| format!("'{}'", a.to_str().unwrap()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let env = |cmd: &mut Command| {
        sandbox.environment(cmd);
    };

    let mut refused = without_tracefs(&format!("exec {}", script(&caps)));
    env(&mut refused);
    let refused = refused.output().unwrap();
    let line = error_line(&refused, "record without tracefs");
    eprintln!("{line}");
    for words in [
        "tracefs is not mounted",
        "mount -t tracefs tracefs /sys/kernel/tracing",
        "hostPath",
        "CAP_SYS_ADMIN",
    ] {
        assert!(line.contains(words), "{words} not in: {line}");
    }

    // CAP_SYS_ADMIN is what mounting takes: with it sonde mounts tracefs itself (in that namespace).
    let mut mounted = without_tracefs(&format!(
        "{} && grep -q ' /sys/kernel/tracing tracefs ' /proc/self/mounts",
        script(&with(&caps, "CAP_SYS_ADMIN"))
    ));
    env(&mut mounted);
    ok(
        &mounted.output().unwrap(),
        "record without tracefs, with CAP_SYS_ADMIN",
    );
    drop(workload);
    let host = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        host.lines().any(|l| l.split(' ').nth(2) == Some("tracefs")),
        "the host's tracefs must stay mounted"
    );
}

#[test]
fn capabilities_held_only_in_a_user_namespace_are_named_as_such() {
    require_root();
    let sandbox = Sandbox::new("userns");
    let bin = build_workload("cpu_split", "lp_userns_cpu_split", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid().to_string();
    let out = sandbox.out("u.pb.gz");
    // Every capability shows, but in a user namespace of the unprivileged user: the kernel's checks
    // (in the initial namespace) refuse, and the error says where the problem is.
    let mut cmd = Command::new("setpriv");
    cmd.args(setpriv_args(&[]))
        .args(["--", "unshare", "--user", "--map-root-user"])
        .arg(&sandbox.sonde)
        .args(record_args(&pid, "1", &out, &[]));
    sandbox.environment(&mut cmd);
    let run = cmd.output().unwrap();
    drop(workload);
    let line = error_line(&run, "record in a user namespace");
    eprintln!("{line}");
    assert!(line.contains("only in a user namespace"), "{line}");
}
