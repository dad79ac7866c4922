//! Interpreters whose frames sonde appends after the native ones, as Debian 12 ships them: CRuby
//! (`ruby3.1`, stripped `libruby`) and PHP (`php8.2`): their split scripts, started and finished
//! alike, and the language frames of a sample (the interpreter's mapping, with file and line), read
//! with the frame resolver the Python tests use.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    path::PathBuf,
    process::{Child, ChildStdout, Command, Stdio},
};

use super::python::{Frame, PySample};

/// One interpreter: its name in sonde (`--runtimes`, its figures), its binary, where its workloads
/// live, the mapping sonde reports its frames in, and the Debian package that installs it.
pub struct Interpreter {
    pub runtime: &'static str,
    pub binary: &'static str,
    pub workloads: &'static str,
    pub mapping: &'static str,
    pub package: &'static str,
}

/// Debian 12's Ruby (`ruby3.1`, installed by `cargo xtask setup --peers`).
pub const RUBY: Interpreter = Interpreter {
    runtime: "ruby",
    binary: "/usr/bin/ruby3.1",
    workloads: "tests/workloads/ruby",
    mapping: "[ruby]",
    package: "ruby3.1",
};

/// Debian 12's PHP (`php8.2-cli`, installed by `cargo xtask setup --peers`).
pub const PHP: Interpreter = Interpreter {
    runtime: "php",
    binary: "/usr/bin/php8.2",
    workloads: "tests/workloads/php",
    mapping: "[php]",
    package: "php8.2-cli",
};

impl Interpreter {
    /// A workload's script.
    pub fn script(&self, name: &str) -> PathBuf {
        super::root().join(self.workloads).join(name)
    }

    /// The language frames of `s`, leaf first.
    pub fn frames<'s>(&self, s: &'s PySample) -> impl Iterator<Item = &'s Frame> + use<'s> {
        let mapping = self.mapping;
        s.frames.iter().filter(move |f| f.mapping == mapping)
    }

    /// Panics, saying how to install it, unless the interpreter is here.
    pub fn require(&self) {
        assert!(
            std::path::Path::new(self.binary).exists(),
            "{} is missing: `cargo xtask setup --peers` installs Debian's {}",
            self.binary,
            self.package
        );
    }

    /// `interpreter flags script args`, started; returns once it prints `ready`. Its output's rest
    /// is read by [`finish`].
    pub fn start(
        &self,
        flags: &[&str],
        name: &str,
        args: &[&str],
    ) -> (Child, BufReader<ChildStdout>) {
        self.require();
        let binary = self.binary;
        let mut child = Command::new(binary)
            .args(flags)
            .arg(self.script(name))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary} {name}: {e}"));
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        if line.trim() != "ready" {
            let _ = child.kill();
            panic!("{binary} {name} did not start (see its stderr above): {line:?}");
        }
        (child, out)
    }
}

/// Waits for the workload to exit; the rest of its output.
pub fn finish(mut child: Child, mut out: BufReader<ChildStdout>) -> String {
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the workload failed: {status}\n{rest}");
    rest
}
