//! Workloads run as shell loops beside a recording of the whole host: short-lived processes (a build,
//! scripts, a Go tool run again and again) that no `--pid` can name in advance.

use std::{
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Child, Command, Stdio},
};

use super::sonde_ok;

/// `sh -c SCRIPT` in a process group of its own, killed with everything it runs when dropped.
pub struct ShellLoop(Child);

impl ShellLoop {
    pub fn start(script: &str) -> Self {
        let child = Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("starting a shell loop");
        Self(child)
    }
}

impl Drop for ShellLoop {
    fn drop(&mut self) {
        // SAFETY: signals the process group this loop leads.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Records the whole host for `seconds` into `out`; the summary (JSON).
pub fn record_host(seconds: &str, out: &Path) -> String {
    sonde_ok(&[
        "record",
        "--duration",
        seconds,
        "--output",
        out.to_str().unwrap(),
        "--summary-json",
        "-",
    ])
}
