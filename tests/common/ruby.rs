//! Ruby workloads and what their samples hold: Debian 12's own `ruby3.1` (stripped `libruby`), the
//! split script, and the Ruby frames of a sample (the `[ruby]` mapping, with file and line), read
//! with the frame resolver the Python tests use.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    path::PathBuf,
    process::{Child, Command, Stdio},
};

use super::python::{Frame, PySample};

/// Debian 12's Ruby (`ruby3.1`, installed by `cargo xtask setup --peers`).
pub const RUBY: &str = "/usr/bin/ruby3.1";
/// The mapping sonde reports Ruby frames in.
pub const RUBY_MAPPING: &str = "[ruby]";

/// A Ruby workload's script.
pub fn script(name: &str) -> PathBuf {
    super::root().join("tests/workloads/ruby").join(name)
}

/// The Ruby frames of `s`, leaf first.
pub fn ruby_frames(s: &PySample) -> impl Iterator<Item = &Frame> {
    s.frames.iter().filter(|f| f.mapping == RUBY_MAPPING)
}

/// `ruby script args`, started; returns once it prints `ready`. Its output's rest is read by
/// [`finish`].
pub fn start(name: &str, args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>) {
    assert!(
        std::path::Path::new(RUBY).exists(),
        "{RUBY} is missing: `cargo xtask setup --peers` installs Debian's ruby3.1"
    );
    let mut child = Command::new(RUBY)
        .arg(script(name))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {RUBY} {name}: {e}"));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    if line.trim() != "ready" {
        let _ = child.kill();
        panic!("{RUBY} {name} did not start (see its stderr above): {line:?}");
    }
    (child, out)
}

/// Waits for the workload to exit; the rest of its output.
pub fn finish(mut child: Child, mut out: BufReader<std::process::ChildStdout>) -> String {
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the workload failed: {status}\n{rest}");
    rest
}
