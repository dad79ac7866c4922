//! Every bad input of `sonde record` is a clear one-line error and a non-zero exit, never a panic.

use crate::common;
use common::*;

fn fails_with(args: &[&str], needle: &str) {
    let out = sonde(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "sonde {args:?} should fail");
    assert!(
        stderr.contains(needle),
        "sonde {args:?}: stderr should mention {needle:?}, got:\n{stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "sonde {args:?} panicked:\n{stderr}"
    );
}

fn out_path() -> String {
    temp_dir("bad_input").join("p.pb.gz").display().to_string()
}

#[test]
fn pid_that_does_not_exist() {
    require_root();
    fails_with(
        &[
            "record",
            "--duration",
            "1",
            "--pid",
            "999999999",
            "--output",
            &out_path(),
        ],
        "process 999999999 does not exist",
    );
}

#[test]
fn frequency_zero_and_above_1000() {
    fails_with(
        &[
            "record",
            "--duration",
            "1",
            "--frequency",
            "0",
            "--output",
            &out_path(),
        ],
        "--frequency",
    );
    fails_with(
        &[
            "record",
            "--duration",
            "1",
            "--frequency",
            "1001",
            "--output",
            &out_path(),
        ],
        "between 1 and 1000",
    );
}

#[test]
fn unwritable_output_is_rejected_before_sampling() {
    require_root();
    let start = std::time::Instant::now();
    fails_with(
        &[
            "record",
            "--duration",
            "30",
            "--output",
            "/nonexistent-dir/p.pb.gz",
        ],
        "cannot write the profile next to /nonexistent-dir/p.pb.gz",
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "the path must be checked before the 30 s of sampling"
    );
}

#[test]
fn missing_capabilities_are_named() {
    // An unprivileged user (nobody) runs the same binary, copied where nobody can reach it (the build
    // directory may sit under a path only root can enter).
    let dir = std::env::temp_dir().join(format!("sonde-nobody-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("sonde");
    std::fs::copy(env!("CARGO_BIN_EXE_sonde"), &copy).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = copy.to_str().unwrap();
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin,
            "record",
            "--duration",
            "1",
            "--output",
            "/tmp/sonde-nobody.pb.gz",
        ])
        .current_dir(&dir)
        .output()
        .expect("setpriv (util-linux)");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    // The first capability found missing is named, and the whole set to grant is listed.
    assert!(stderr.contains("sonde: error: missing CAP_"), "{stderr}");
    assert!(
        stderr.contains("CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE"),
        "{stderr}"
    );
}

#[test]
fn offcpu_rejects_frequency_and_absurd_min_block() {
    require_root();
    fails_with(
        &[
            "record",
            "--profile",
            "offcpu",
            "--frequency",
            "99",
            "--duration",
            "1",
            "--output",
            &out_path(),
        ],
        "does not apply to --profile offcpu",
    );
    fails_with(
        &[
            "record",
            "--profile",
            "offcpu",
            "--min-block-us",
            "999999999",
            "--duration",
            "1",
            "--output",
            &out_path(),
        ],
        "--min-block-us 999999999 is too large",
    );
    fails_with(
        &[
            "record",
            "--profile",
            "offcpu",
            "--min-block-us",
            "-5",
            "--duration",
            "1",
            "--output",
            &out_path(),
        ],
        "--min-block-us",
    );
}

#[test]
fn missing_tracefs_is_mounted_or_named() {
    require_root();
    // In a private mount namespace with tracefs unmounted, sonde mounts it itself and succeeds.
    let bin = env!("CARGO_BIN_EXE_sonde");
    let out_ok = out_path();
    let script = format!(
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; \
         test ! -d /sys/kernel/tracing/events || exit 90; exec {bin} record --profile offcpu --duration 1 --output {out_ok}"
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sonde should mount tracefs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Where it cannot be mounted (mount point hidden under a read-only tmpfs), the error names the fix.
    let script = format!(
        "mount -t tmpfs -o ro,size=4k none /sys/kernel || exit 91; exec {bin} record --profile offcpu --duration 1 --output {out_ok}"
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("tracefs is not mounted") && stderr.contains("mount -t tracefs"),
        "{stderr}"
    );
}
