//! The daemon benchmark (`--daemon-minutes`): `sonde run` over 50 busy processes into a local directory.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
};

use anyhow::bail;

use super::{compile, cpus};
use crate::util::root;

/// `sonde run` over 50 busy processes: wire bytes of OTLP (one request per window, shared dictionary)
/// against one gzip pprof per process per window (the Pyroscope style), and the agent's CPU and RSS.
pub(super) fn run(sonde: &Path, dir: &Path, minutes: u64) -> anyhow::Result<()> {
    let busy = compile(
        &root().join("tests/workloads/cpu_split.c"),
        &dir.join("cpu_split"),
    )?;
    let seconds = minutes * 60;
    let mut workers: Vec<Child> = (0..50)
        .map(|_| Command::new(&busy).arg((seconds + 30).to_string()).spawn())
        .collect::<Result<_, _>>()?;
    let data = dir.join("daemon-data");
    let _ = std::fs::remove_dir_all(&data);
    let out = Command::new(sonde)
        .args([
            "run",
            "--export-interval",
            "10",
            "--report-wire-bytes",
            "--duration",
            &seconds.to_string(),
            "--data-dir",
        ])
        .arg(&data)
        .env("SONDE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let log = String::from_utf8_lossy(&out.stderr);
    let field = |line: &str, key: &str| -> Option<f64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim_matches('"'))
            .and_then(|v| v.parse().ok())
    };
    let windows: Vec<&str> = log.lines().filter(|l| l.contains(" window ")).collect();
    let wires: Vec<&str> = log.lines().filter(|l| l.contains(" wire ")).collect();
    if windows.is_empty() || wires.is_empty() {
        bail!("sonde run produced no window reports:\n{log}");
    }
    let sum = |lines: &[&str], key: &str| lines.iter().filter_map(|l| field(l, key)).sum::<f64>();
    let (otlp, pprof, samples) = (
        sum(&wires, "otlp_gzip_bytes"),
        sum(&wires, "pprof_gzip_bytes"),
        sum(&wires, "wire_samples"),
    );
    let n = wires.len() as f64;
    let rss: Vec<f64> = windows.iter().filter_map(|l| field(l, "rss_mib")).collect();
    let cpu: Vec<f64> = windows
        .iter()
        .filter_map(|l| field(l, "cpu_percent"))
        .collect();
    let total_samples = sum(&windows, "samples");
    println!(
        "## Daemon: 50 busy processes, {minutes} min, 99 Hz, 10 s windows ({} windows)",
        windows.len()
    );
    println!("| | OTLP (one request/window) | gzip pprof per process per window | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| bytes per window | {:.0} | {:.0} | {:.2} |",
        otlp / n,
        pprof / n,
        otlp / pprof
    );
    println!(
        "| bytes per sample (stack entry) | {:.1} | {:.1} | |",
        otlp / samples,
        pprof / samples
    );
    println!(
        "| bytes per CPU sample | {:.2} | {:.2} | |",
        otlp / total_samples,
        pprof / total_samples
    );
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "agent CPU: mean {:.2}% of one CPU = {:.3}% of the machine (max window {:.2}%); RSS first {:.1} MiB, last {:.1} MiB, max {:.1} MiB",
        avg(&cpu),
        avg(&cpu) / cpus() as f64,
        cpu.iter().cloned().fold(0.0, f64::max),
        rss.first().copied().unwrap_or(0.0),
        rss.last().copied().unwrap_or(0.0),
        rss.iter().cloned().fold(0.0, f64::max),
    );
    println!("(CPU includes encoding every window a second time for this size report.)");
    Ok(())
}
