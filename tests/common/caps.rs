//! Running sonde as an unprivileged user that holds only chosen capabilities (`setpriv`), for the
//! least-privilege tests. The tests themselves run as root: they create the user, start the workloads
//! as root (so reading them needs the capabilities) and drop to the user only for sonde.
#![allow(dead_code)]

use std::{
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The system user the tests run sonde as.
pub const USER: &str = "sonde-test";

/// The canonical capability list, read from `deploy/capabilities.txt` at test time (`CAP_*` names).
pub fn canonical() -> Vec<String> {
    let path = crate::common::root().join("deploy/capabilities.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let caps: Vec<String> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    assert!(
        caps.iter().all(|c| c.starts_with("CAP_")),
        "{}: {caps:?}",
        path.display()
    );
    caps
}

/// `caps` without `cap`.
pub fn without(caps: &[String], cap: &str) -> Vec<String> {
    caps.iter().filter(|c| *c != cap).cloned().collect()
}

/// `caps` plus `cap`.
pub fn with(caps: &[String], cap: &str) -> Vec<String> {
    let mut all = caps.to_vec();
    all.push(cap.to_owned());
    all
}

/// Creates the system user [`USER`] unless it exists (idempotent, also when two tests race).
pub fn ensure_user() {
    let exists = || {
        Command::new("id")
            .args(["-u", USER])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if exists() {
        return;
    }
    let out = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            USER,
        ])
        .output()
        .expect("useradd (package passwd) must be installed");
    assert!(
        out.status.success() || exists(),
        "useradd {USER} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A place the user can reach: a copy of sonde (mode 0755) in a directory of its own (0755) under the
/// system temporary directory (the repository's `target/` may not be searchable by others), and a
/// data directory owned by the user (0700). Removed when dropped.
pub struct Sandbox {
    pub dir: PathBuf,
    pub sonde: PathBuf,
    pub data: PathBuf,
}

impl Sandbox {
    pub fn new(name: &str) -> Self {
        ensure_user();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!("sonde-lp-{name}-{nanos}"));
        std::fs::create_dir_all(&dir).unwrap();
        chmod(&dir, 0o755);
        let sonde = dir.join("sonde");
        std::fs::copy(env!("CARGO_BIN_EXE_sonde"), &sonde).unwrap();
        chmod(&sonde, 0o755);
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        chmod(&data, 0o700);
        let status = Command::new("chown")
            .arg(format!("{USER}:{USER}"))
            .arg(&data)
            .status()
            .unwrap();
        assert!(status.success(), "chown {}", data.display());
        Self { dir, sonde, data }
    }

    /// `setpriv` switching to [`USER`] with exactly `caps` (inheritable, ambient and bounding sets),
    /// then running this sandbox's sonde with `args`.
    pub fn command(&self, caps: &[String], args: &[&str]) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args(setpriv_args(caps))
            .arg("--")
            .arg(&self.sonde)
            .args(args);
        self.environment(&mut cmd);
        cmd
    }

    /// The environment sonde gets: its home and caches in the data directory, no debuginfod.
    pub fn environment(&self, cmd: &mut Command) {
        cmd.env("SONDE_LOG", "warn")
            .env("HOME", &self.data)
            .env("XDG_CACHE_HOME", &self.data)
            .env("DEBUGINFOD_URLS", "");
    }

    /// Runs this sandbox's sonde as [`USER`] with exactly `caps`.
    pub fn sonde(&self, caps: &[String], args: &[&str]) -> Output {
        self.command(caps, args).output().expect("running setpriv")
    }

    /// A path in the data directory, as a string.
    pub fn out(&self, name: &str) -> String {
        self.data.join(name).to_str().unwrap().to_owned()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `setpriv` options that switch to [`USER`] holding exactly `caps` (`CAP_BPF` -> `+bpf`).
pub fn setpriv_args(caps: &[String]) -> Vec<String> {
    let set = std::iter::once("-all".to_owned())
        .chain(caps.iter().map(|c| {
            format!(
                "+{}",
                c.strip_prefix("CAP_")
                    .unwrap_or_else(|| panic!("{c} is not a CAP_* name"))
                    .to_lowercase()
            )
        }))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        format!("--reuid={USER}"),
        format!("--regid={USER}"),
        "--clear-groups".into(),
        format!("--inh-caps={set}"),
        format!("--ambient-caps={set}"),
        format!("--bounding-set={set}"),
    ]
}

/// Whether [`USER`] without any capability sees only zero addresses in `/proc/kallsyms` (then kernel
/// frames need CAP_SYSLOG).
pub fn kallsyms_hidden_from_user() -> bool {
    let out = Command::new("setpriv")
        .args(setpriv_args(&[]))
        .args(["--", "head", "-n", "64", "/proc/kallsyms"])
        .output()
        .expect("running setpriv");
    assert!(out.status.success(), "reading /proc/kallsyms as {USER}");
    String::from_utf8_lossy(&out.stdout).lines().all(|l| {
        l.split(' ')
            .next()
            .is_some_and(|a| a.bytes().all(|b| b == b'0'))
    })
}

/// Panics with sonde's output unless it succeeded; returns its stdout.
pub fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The one error line of a failed sonde (`sonde: error: ...`), panicking unless it failed with one.
pub fn error_line(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{what} succeeded, expected an error:\n{stderr}"
    );
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("sonde: error:"))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "{what}: one error line expected:\n{stderr}"
    );
    errors[0].to_owned()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
