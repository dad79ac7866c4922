//! The .deb (`cargo xtask deb`): it installs with dpkg, lists the binary, the unit and the conffile, creates
//! the `sonde` system user, and the installed binary profiles a real workload as that user holding only the
//! unit's capabilities (setpriv: systemd is not PID 1 here). Purging it leaves the machine as it was.

use crate::common;
use crate::common::caps;
use crate::common::deploy;

use std::{
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    process::{Command, Output},
};

use common::*;
use deploy::{setpriv_caps, unit_values, unit_words};

const UNIT: &str = "/usr/lib/systemd/system/sonde.service";
const CONFIG: &str = "/etc/sonde/sonde.toml";

fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"))
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = output(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn installed() -> bool {
    output("dpkg-query", &["-W", "-f=${Status}", "sonde"])
        .status
        .success()
}

/// Purges the package when dropped, also when an assertion failed, so the machine is left as it was.
struct Package;

impl Drop for Package {
    fn drop(&mut self) {
        let _ = output("dpkg", &["--purge", "sonde"]);
    }
}

/// The .deb of the binary under test, built once for the tests that read it (each build compresses
/// the binary with xz: about 15 s); its path.
fn host_deb() -> PathBuf {
    static DEB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DEB.get_or_init(|| {
        let binary = Path::new(env!("CARGO_BIN_EXE_sonde"));
        build_deb_of(&temp_dir("deploy-deb-host"), binary, None)
    })
    .clone()
}

/// Builds the .deb of `binary`, for Rust target `target` when given; its path.
fn build_deb_of(dir: &Path, binary: &Path, target: Option<&str>) -> PathBuf {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .args(["xtask", "deb", "--binary"])
        .arg(binary)
        .args(target.map(|t| format!("--target={t}")))
        .arg("--output")
        .arg(dir)
        .output()
        .expect("running cargo xtask deb");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo xtask deb failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{stdout}");
    let deb = stdout
        .lines()
        .find_map(|l| l.strip_prefix("deb: "))
        .unwrap_or_else(|| panic!("no `deb:` line in\n{stdout}"));
    PathBuf::from(deb)
}

/// `program args` as the `sonde` user holding exactly `caps` (inheritable, ambient and bounding sets, no
/// new privileges), as the unit's User=, AmbientCapabilities=, CapabilityBoundingSet= and NoNewPrivileges=
/// set them.
fn as_sonde_user(caps: &str, program: &str, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=sonde", "--regid=sonde", "--init-groups"])
        .arg(format!("--inh-caps={caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(format!("--bounding-set={caps}"))
        .args(["--no-new-privs", "--"])
        .arg(program)
        .args(args)
        .env("SONDE_LOG", "warn")
        .output()
        .expect("setpriv (util-linux) must be installed")
}

/// The unit's file system settings, applied by hand in a private mount namespace (systemd is not PID 1
/// here), then `argv` as the sonde user with `caps` (see [`as_sonde_user`]):
/// - ProtectSystem=strict, ProtectHome=read-only, ReadOnlyPaths=/sys ..., ProtectControlGroups=: every
///   mount read-only but /proc and /dev, then /proc/sys too; StateDirectory=/CacheDirectory= writable;
/// - PrivateTmp=: fresh /tmp and /var/tmp;
/// - InaccessiblePaths=/proc/kcore /proc/kmsg: a mode-000 file bound over them.
///
/// Not applied: the system call filter (tests/deploy_systemd.rs checks a real run's calls against it),
/// PrivateDevices= and the namespace and address family restrictions.
fn in_unit_sandbox(dir: &Path, caps: &str, argv: &[&str]) -> Output {
    let blocked = dir.join("inaccessible");
    std::fs::write(&blocked, "").unwrap();
    std::fs::set_permissions(&blocked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let script = r#"set -e
        blocked=$1; caps=$2; shift 2
        for m in $(awk '{print $5}' /proc/self/mountinfo | sort -u); do
            case "$m" in /proc|/proc/*|/dev|/dev/*) continue ;; esac
            mount -o remount,bind,ro "$m" 2>/dev/null || true
        done
        if touch /etc/sonde/.probe 2>/dev/null || touch /sys/fs/cgroup/.probe 2>/dev/null; then
            echo "the sandbox left / or /sys writable" >&2; exit 97
        fi
        mount --bind /proc/sys /proc/sys; mount -o remount,bind,ro /proc/sys
        for d in /var/lib/sonde /var/cache/sonde; do mount --bind "$d" "$d"; mount -o remount,bind,rw "$d"; done
        # Before PrivateTmp's fresh /tmp: the blocking file lives in the test's directory, which may be
        # under /tmp (a CI clone).
        for f in /proc/kcore /proc/kmsg; do [ -e "$f" ] && mount --bind "$blocked" "$f"; done
        mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /var/tmp
        exec setpriv --reuid=sonde --regid=sonde --init-groups --inh-caps="$caps" --ambient-caps="$caps" \
            --bounding-set="$caps" --no-new-privs -- "$@""#;
    Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(&blocked)
        .arg(caps)
        .args(argv)
        .env("SONDE_LOG", "warn")
        .output()
        .expect("unshare (util-linux) must be installed")
}

#[test]
fn deb_installs_and_its_binary_profiles_as_the_sonde_user_with_the_units_capabilities() {
    require_root();
    if installed() {
        // Left by an interrupted run of this test: the package is ours to remove.
        ok("dpkg", &["--purge", "sonde"]);
    }
    assert!(
        !output("getent", &["passwd", "sonde"]).status.success(),
        "a `sonde` user exists without the package: remove it (userdel sonde) before this test"
    );
    for path in [
        "/usr/bin/sonde",
        "/etc/sonde",
        "/var/lib/sonde",
        "/var/cache/sonde",
    ] {
        assert!(
            !Path::new(path).exists(),
            "{path} exists without the package: remove it first"
        );
    }

    let dir = temp_dir("deploy-package");
    let deb = host_deb();
    let _package = Package;
    ok("dpkg", &["--install", deb.to_str().unwrap()]);

    let files = ok("dpkg", &["--listfiles", "sonde"]);
    for path in ["/usr/bin/sonde", UNIT, CONFIG] {
        assert!(
            files.lines().any(|l| l == path),
            "dpkg -L lacks {path}:\n{files}"
        );
    }
    let conffiles = ok("dpkg-query", &["-W", "-f=${Conffiles}", "sonde"]);
    assert!(
        conffiles.contains(CONFIG),
        "{CONFIG} is not a conffile: {conffiles}"
    );

    // A system user without a login shell.
    let passwd = ok("getent", &["passwd", "sonde"]);
    let fields: Vec<&str> = passwd.trim().split(':').collect();
    let uid: u32 = fields[2].parse().unwrap();
    assert!(uid > 0 && uid < 1000, "not a system user: {passwd}");
    assert_eq!(fields[6], "/usr/sbin/nologin", "{passwd}");

    // The installed unit's capabilities are the measured ones.
    let unit = std::fs::read_to_string(UNIT).unwrap();
    let caps: std::collections::BTreeSet<String> = caps::canonical().into_iter().collect();
    assert_eq!(unit_words(&unit, "AmbientCapabilities"), caps);
    let caps = setpriv_caps(&unit_words(&unit, "AmbientCapabilities"));

    // The sonde user's own output directory, private as the unit's StateDirectoryMode makes it.
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o700)).unwrap();

    let bin = build_workload("cpu_split", "cpu_split_deb", FP_FLAGS);
    let workload = Workload::start(&bin, &["30"]);
    let pid = workload.pid();
    let profile = out.join("cpu.pb.gz");
    let recorded = as_sonde_user(
        &caps,
        "/usr/bin/sonde",
        &[
            "record",
            "--duration",
            "2",
            "--pid",
            &pid.to_string(),
            "--output",
            profile.to_str().unwrap(),
        ],
    );
    let summary = String::from_utf8_lossy(&recorded.stdout).into_owned();
    assert!(
        recorded.status.success(),
        "sonde record as the sonde user failed:\n{summary}{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    assert_eq!(
        std::fs::metadata(&profile).unwrap().uid(),
        uid,
        "written as the sonde user"
    );
    let samples = resolve(&read_pprof(&profile));
    let all = total(&samples, pid, 0);
    // One busy thread for 2 s at 99 Hz: about 198 samples.
    assert!(all >= 100, "{all} samples of the workload\n{summary}");

    // The daemon: the unit's own command line (metrics on a free port: an agent may serve 9464 here), as
    // the sonde user, in the unit's file system sandbox, writing into its StateDirectory.
    let exec = unit_values(&unit, "ExecStart");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The address is the config file's `metrics_addr`; a flag wins over it.
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut argv: Vec<&str> = exec[0].split_whitespace().collect();
    argv.extend(["--export-interval", "1", "--duration", "3"]);
    argv.extend(["--metrics-addr", &metrics_addr]);
    for state in ["/var/lib/sonde", "/var/cache/sonde"] {
        // What systemd makes for StateDirectory=/CacheDirectory= with User=sonde and mode 0700.
        std::fs::create_dir(state).unwrap();
        std::os::unix::fs::chown(state, Some(uid), Some(uid)).unwrap();
        std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let ran = in_unit_sandbox(&dir, &caps, &argv);
    drop(workload);
    assert!(
        ran.status.success(),
        "the unit's command failed in its sandbox: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let index = std::fs::read_to_string("/var/lib/sonde/index.jsonl").expect("index.jsonl");
    assert!(index.lines().count() > 0, "sonde run wrote no profile");
    let meta = std::fs::metadata("/var/lib/sonde/index.jsonl").unwrap();
    assert_eq!(meta.uid(), uid, "written as the sonde user");

    // Purge: files, user and group gone, nothing left behind.
    std::fs::remove_dir_all(&out).unwrap();
    ok("dpkg", &["--purge", "sonde"]);
    assert!(!installed(), "dpkg still knows the package after --purge");
    for path in [
        "/usr/bin/sonde",
        UNIT,
        "/etc/sonde",
        "/var/lib/sonde",
        "/var/cache/sonde",
    ] {
        assert!(!Path::new(path).exists(), "{path} survives the purge");
    }
    assert!(
        !output("getent", &["passwd", "sonde"]).status.success(),
        "user sonde survives the purge"
    );
    assert!(
        !output("getent", &["group", "sonde"]).status.success(),
        "group sonde survives the purge"
    );
}

/// The arm64 package (`cargo xtask deb --target aarch64-unknown-linux-gnu`): the same files as the
/// host's, its binary the arm64 build, and what dpkg reads of it says arm64 and depends on the
/// target's libc. (It cannot be installed on this x86_64 host: the arm64 VM guests run the same
/// binary.)
#[test]
fn the_arm64_deb_holds_the_same_files_with_the_arm64_binary() {
    let dir = temp_dir("deploy-deb-arm64");
    let host = host_deb();
    let arm64_sonde = common::vm::Arch::Aarch64.sonde();
    let arm64 = build_deb_of(
        &dir.join("arm64"),
        &arm64_sonde,
        Some("aarch64-unknown-linux-gnu"),
    );
    let field = |deb: &Path, name: &str| {
        ok("dpkg-deb", &["--field", deb.to_str().unwrap(), name])
            .trim()
            .to_owned()
    };
    assert_eq!(field(&arm64, "Architecture"), "arm64");
    assert_eq!(field(&arm64, "Package"), field(&host, "Package"));
    assert_eq!(field(&arm64, "Version"), field(&host, "Version"));
    let depends = field(&arm64, "Depends");
    assert!(
        depends.contains("libc6") && depends.contains("adduser"),
        "Depends: {depends}"
    );
    let names = |deb: &Path| -> Vec<String> {
        ok("dpkg-deb", &["--contents", deb.to_str().unwrap()])
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5).map(str::to_owned))
            .collect()
    };
    assert_eq!(names(&arm64), names(&host));
    let unpacked = dir.join("arm64-files");
    ok(
        "dpkg-deb",
        &[
            "--extract",
            arm64.to_str().unwrap(),
            unpacked.to_str().unwrap(),
        ],
    );
    let packaged = unpacked.join("usr/bin/sonde");
    assert_eq!(
        std::fs::read(&packaged).unwrap(),
        std::fs::read(&arm64_sonde).unwrap(),
        "the arm64 package's usr/bin/sonde is not the arm64 build"
    );
    assert_eq!(
        deploy::elf_machine(&packaged),
        deploy::EM_AARCH64,
        "{} is not an aarch64 ELF",
        packaged.display()
    );
}
