//! Running `sonde run` in the background for the spool and thread-death tests: its log goes to a file
//! that the test reads while it runs, its window figures to a JSON-lines file beside it
//! (`--summary-json`, read with [`windows_json`]), and the exit summary line
//! (`sonde stopped windows_produced=...`) and the export counters printed with it are parsed back.
#![allow(dead_code)]

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

/// `sonde run` in the background, killed when dropped (also when an assertion fails).
pub struct Daemon {
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    /// Starts `sonde run ARGS` with `SONDE_LOG=info`, its stderr into `log` and its JSON window log
    /// into [`json_log_of`]`(log)`.
    pub fn start(args: &[&str], log: &Path) -> Self {
        let file = std::fs::File::create(log).unwrap();
        let _ = std::fs::remove_file(json_log_of(log));
        let child = Command::new(env!("CARGO_BIN_EXE_sonde"))
            .arg("run")
            .args(args)
            .arg("--summary-json")
            .arg(json_log_of(log))
            .env("SONDE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("running sonde");
        Self {
            child: Some(child),
            log: log.to_owned(),
        }
    }

    /// What sonde logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Windows made so far (one JSON `window` line each).
    pub fn windows(&self) -> usize {
        windows_json(&json_log_of(&self.log)).len()
    }

    /// Waits until `n` windows were made, panicking with the log after `timeout`.
    pub fn wait_windows(&mut self, n: usize, timeout: Duration) {
        let end = Instant::now() + timeout;
        while self.windows() < n {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "sonde exited ({status}) before {n} windows:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < end,
                "fewer than {n} windows after {timeout:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM and waits; returns the status, the time the stop took, and the log.
    pub fn stop(mut self) -> (ExitStatus, Duration, String) {
        let mut child = self.child.take().unwrap();
        let asked = Instant::now();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        (status, asked.elapsed(), self.log())
    }

    /// Sends SIGINT (Ctrl-C) and waits at most `timeout`; returns the status, the time the stop took,
    /// and the log. Panics with the log if it did not exit in time.
    pub fn interrupt(self, timeout: Duration) -> (ExitStatus, Duration, String) {
        let child = self.child.as_ref().unwrap();
        let asked = Instant::now();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let (status, log) = self.wait_exit(timeout);
        (status, asked.elapsed(), log)
    }

    /// Waits (at most `timeout`) for sonde to exit by itself; returns the status and the log.
    pub fn wait_exit(mut self, timeout: Duration) -> (ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let end = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status, self.log());
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("sonde did not exit within {timeout:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Where [`Daemon::start`] has sonde write its JSON window log: `log` with the extension `jsonl`.
pub fn json_log_of(log: &Path) -> PathBuf {
    log.with_extension("jsonl")
}

/// The `{"event":"window",...}` lines of a `--summary-json` file, in order.
pub fn windows_json(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "window")
        .collect()
}

/// Figure `key` of window `n` (0 = first) of a `--summary-json` file, panicking when absent.
pub fn window_figure(path: &Path, n: usize, key: &str) -> f64 {
    let windows = windows_json(path);
    windows
        .get(n)
        .and_then(|w| w["figures"][key].as_f64())
        .unwrap_or_else(|| {
            panic!(
                "no figure {key} in window {n} of {}: {windows:?}",
                path.display()
            )
        })
}

/// The numbers of the exit line (`sonde stopped windows_produced=4 ...`) and the export counters
/// printed after it (`sonde_export_spooled_batches_total 4`, `..._total{reason="spool_full"} 2`).
pub fn exit_summary(log: &str) -> HashMap<String, u64> {
    let at = log
        .find("sonde stopped")
        .unwrap_or_else(|| panic!("no exit summary in the log:\n{log}"));
    let mut out = HashMap::new();
    let mut lines = log[at..].lines();
    for field in lines.next().unwrap().split_whitespace() {
        if let Some((k, v)) = field.split_once('=')
            && let Ok(v) = v.trim_matches('"').parse()
        {
            out.insert(k.to_owned(), v);
        }
    }
    // `metrics=` is the last field; its first counter shares the exit line.
    let first = log[at..].lines().next().unwrap();
    let counters = first
        .split_once("metrics=")
        .map(|(_, c)| c)
        .into_iter()
        .chain(lines);
    for line in counters {
        let mut parts = line.split_whitespace();
        if let (Some(name), Some(value), None) = (parts.next(), parts.next(), parts.next())
            && name.starts_with("sonde_export_")
            && let Ok(v) = value.parse()
        {
            out.insert(name.to_owned(), v);
        }
    }
    out
}

/// [`exit_summary`] of one sink's exit line (`sonde stopped sink="pyroscope" ...`) when several
/// sinks ran, each printing its own.
pub fn exit_summary_of(log: &str, sink: &str) -> HashMap<String, u64> {
    let marker = format!("sink=\"{sink}\"");
    let at = log
        .match_indices("sonde stopped")
        .map(|(i, _)| i)
        .find(|&i| log[i..].lines().next().is_some_and(|l| l.contains(&marker)))
        .unwrap_or_else(|| panic!("no exit summary of the {sink} sink in the log:\n{log}"));
    let rest = &log[at..];
    // Up to the next sink's exit line.
    let end = rest[1..]
        .find("sonde stopped")
        .map_or(rest.len(), |i| rest[..i + 1].rfind('\n').unwrap_or(i + 1));
    exit_summary(&rest[..end])
}

/// A field of [`exit_summary`], panicking with the log when missing.
pub fn field(summary: &HashMap<String, u64>, key: &str, log: &str) -> u64 {
    *summary
        .get(key)
        .unwrap_or_else(|| panic!("the exit summary has no {key}:\n{log}"))
}

/// The `*.batch` files in `<data>/spool`, sorted, with their sizes.
pub fn spool_files(data: &Path) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = std::fs::read_dir(data.join("spool"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.metadata().map(|m| m.len()).unwrap_or(0),
                    )
                })
                .filter(|(n, _)| n.ends_with(".batch"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The batch id inside a spool file name (`<end>-<id>.batch`).
pub fn batch_id_of_file(name: &str) -> String {
    let base = name.trim_end_matches(".batch");
    base.split_once('-').unwrap().1.to_owned()
}

/// Bytes of every file under `<data>/spool` (quarantined and temporary files included).
pub fn spool_disk_bytes(data: &Path) -> u64 {
    std::fs::read_dir(data.join("spool"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
