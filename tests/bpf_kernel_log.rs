//! Kernel diagnostics through aya-log: a failed program run is logged at debug level under
//! `sonde::bpf::kernel` when that target is at debug level (`sonde::bpf=debug` or
//! `sonde::bpf::kernel=debug`), and not at all otherwise; with the log on, the programs still pass the
//! verifier and record normally.
//!
//! No honest way makes a program fail on this kernel (its failure branches guard lookups that cannot
//! miss), so the test uses the test hook `SONDE_TEST_FAIL_EXEC=1`: the exec program then fails on every
//! exec, through the same counting and logging path as a real failure.

use crate::common;
use std::{
    io::{BufRead as _, BufReader, Read as _},
    path::Path,
    process::{Command, Stdio},
};

use common::*;

/// The kernel's line for an exec made to fail (aya-log prints the program name, then the step).
const EXEC_FAILED: &str = "sonde_exec: failing on purpose (test hook TEST_FAIL_EXEC)";
/// Execs the test makes while sonde records.
const EXECS: usize = 5;

#[test]
fn a_failed_run_is_logged_at_debug_level_only_when_asked_and_recording_is_unchanged() {
    require_root();
    let bin = build_workload("cpu_split", "cpu_split_kernel_log", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let pid = workload.pid().to_string();
    let dir = temp_dir("kernel_log");

    // On: every exec fails, and each failure arrives as a debug line of the kernel target.
    let on = dir.join("on.pb.gz");
    let (summary, log, threads) = record_while_execing(
        "info,sonde::bpf=debug",
        true,
        &[
            "--duration",
            SPLIT_SECONDS,
            "--pid",
            &pid,
            "--output",
            on.to_str().unwrap(),
        ],
    );
    let context = format!("threads: {threads:?}\nstderr:\n{log}\nsummary:\n{summary}");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(EXEC_FAILED)).collect();
    assert!(
        lines.len() >= EXECS,
        "expected a kernel log line for each of the {EXECS} failed execs, got {}\n{context}",
        lines.len()
    );
    for line in &lines {
        assert!(
            line.contains(" DEBUG sonde::bpf::kernel: "),
            "kernel line not at debug level under sonde::bpf::kernel: {line}"
        );
    }
    assert!(
        summary_field(&summary, "program_errors") >= EXECS as f64,
        "the failed execs are not counted\n{context}"
    );
    assert!(
        threads.iter().any(|t| t == "sonde-kernel-lo"),
        "no kernel log reader thread\n{context}"
    );
    // The programs passed the verifier with their log calls kept, and sampled as usual.
    assert_cpu_split(&resolve(&read_pprof(&on)), workload.pid(), &context);

    // Off (sonde::bpf at info, the rest of sonde at debug): the failures are still counted, but the
    // programs never log, and no reader runs.
    let off = dir.join("off.pb.gz");
    let (summary, log, threads) = record_while_execing(
        "info,sonde=debug,sonde::bpf=info",
        true,
        &[
            "--duration",
            SPLIT_SECONDS,
            "--pid",
            &pid,
            "--output",
            off.to_str().unwrap(),
        ],
    );
    let context = format!("threads: {threads:?}\nstderr:\n{log}\nsummary:\n{summary}");
    assert!(
        summary_field(&summary, "program_errors") >= EXECS as f64,
        "the exec program did not run (or its failures were not counted)\n{context}"
    );
    assert!(
        !log.contains("sonde::bpf::kernel"),
        "kernel lines logged without being asked for\n{context}"
    );
    assert!(
        !threads.iter().any(|t| t == "sonde-kernel-lo"),
        "kernel log reader running without being asked for\n{context}"
    );
    assert_cpu_split(&resolve(&read_pprof(&off)), workload.pid(), &context);
    drop(workload);
}

#[test]
fn off_cpu_tracking_loads_and_records_with_the_kernel_log_on() {
    require_root();
    let bin = build_workload("offcpu_sleep", "offcpu_sleep_kernel_log", FP_FLAGS);
    let workload = Workload::start(&bin, &["60"]);
    let out = temp_dir("kernel_log_offcpu").join("offcpu.pb.gz");
    let pid = workload.pid().to_string();
    let (summary, log, _) = record_while_execing(
        "info,sonde::bpf::kernel=debug",
        false,
        &[
            "--profile",
            "offcpu",
            "--duration",
            "3",
            "--pid",
            &pid,
            "--output",
            out.to_str().unwrap(),
        ],
    );
    let context = format!("stderr:\n{log}\nsummary:\n{summary}");
    assert!(
        log.contains("kernel log on"),
        "the kernel log was not turned on\n{context}"
    );
    assert!(
        summary_field(&summary, "offcpu_episodes") > 50.0,
        "too few off-CPU episodes with the kernel log on\n{context}"
    );
    let samples = resolve(&read_pprof(&out));
    assert!(
        inclusive(&samples, workload.pid(), "sleep_twenty", 0) > 0,
        "no off-CPU time in sleep_twenty\n{context}"
    );
    // Nothing failed, so the kernel said nothing.
    assert!(
        !log.contains("sonde::bpf::kernel: sonde_"),
        "unexpected kernel failures\n{context}"
    );
    drop(workload);
}

/// Runs `sonde --log FILTER record ARGS`; once it is recording, notes its thread names and, with
/// `fail_exec`, runs `/bin/true` [`EXECS`] times under the exec test hook. Returns the summary
/// (stdout), the log (stderr) and the thread names.
fn record_while_execing(
    filter: &str,
    fail_exec: bool,
    args: &[&str],
) -> (String, String, Vec<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sonde"));
    command
        .args(["--log", filter, "record", "--summary-json", "-"])
        .args(args)
        // `SONDE_LOG` would override `--log`.
        .env_remove("SONDE_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if fail_exec {
        command.env("SONDE_TEST_FAIL_EXEC", "1");
    }
    let mut child = command.spawn().expect("running sonde");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.wait();
            panic!("sonde exited before recording:\n{log}");
        }
        log.push_str(&line);
        if line.contains("recording") {
            break;
        }
    }
    // Read the rest of the log on the side: sonde must never block on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let threads = thread_names(child.id());
    if fail_exec {
        for _ in 0..EXECS {
            let status = Command::new("/bin/true")
                .status()
                .expect("running /bin/true");
            assert!(status.success());
        }
    }
    let mut summary = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut summary)
        .unwrap();
    log.push_str(&rest.join().unwrap());
    let status = child.wait().unwrap();
    assert!(status.success(), "sonde failed ({status}):\n{log}");
    (summary, log, threads)
}

/// The names of `pid`'s threads (truncated by the kernel to 15 bytes).
fn thread_names(pid: u32) -> Vec<String> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    std::fs::read_dir(tasks)
        .expect("listing sonde's threads")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim_end().to_owned())
        .collect()
}
