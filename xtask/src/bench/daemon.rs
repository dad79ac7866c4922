//! The daemon benchmarks: `sonde run` over 50 busy processes into a local directory
//! (`--daemon-minutes`), and its footprint over one process of each runtime it walks
//! (`--footprint-seconds`).

use std::{
    path::Path,
    process::{Child, Command, Stdio},
};

use anyhow::bail;

use super::{compile, cpus, java, node, python};
use crate::util::root;

/// Workers of the 50 that run two threads (`busy_threads.c`).
const THREADED: usize = 10;
/// Iterations no run reaches: busy_threads runs fixed work and is killed instead.
const FOREVER_ITERATIONS: &str = "1000000000000000";

/// `sonde run` over 50 busy processes: wire bytes of OTLP (one request per window, shared dictionary)
/// against one gzip pprof per process per window (the Pyroscope style), and the agent's CPU and RSS.
pub(super) fn run(sonde: &Path, dir: &Path, minutes: u64) -> anyhow::Result<()> {
    let busy = compile(
        &root().join("tests/workloads/cpu_split.c"),
        &dir.join("cpu_split"),
    )?;
    // Ten of them with two busy threads each, so the wire report shows what per-thread series
    // cost (`thread.id`, `thread.name`).
    let threaded = compile(
        &root().join("tests/workloads/busy_threads.c"),
        &dir.join("busy_threads"),
    )?;
    let seconds = minutes * 60;
    let mut workers: Vec<Child> = (0..50)
        .map(|i| match i < THREADED {
            true => Command::new(&threaded).arg(FOREVER_ITERATIONS).spawn(),
            false => Command::new(&busy).arg((seconds + 30).to_string()).spawn(),
        })
        .collect::<Result<_, _>>()?;
    let data = dir.join("daemon-data");
    let _ = std::fs::remove_dir_all(&data);
    // The window figures and wire sizes, as JSON lines (`--summary-json`).
    let json = dir.join("daemon-summary.jsonl");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(sonde)
        .args([
            "run",
            "--export-interval",
            "10",
            "--report-wire-bytes",
            "--duration",
            &seconds.to_string(),
            "--summary-json",
        ])
        .arg(&json)
        .arg("--data-dir")
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
    let lines = summary_lines(&json);
    let event = |e: &str| lines.iter().filter(|l| l["event"] == e).collect::<Vec<_>>();
    let (windows, wires) = (event("window"), event("wire"));
    if windows.is_empty() || wires.is_empty() {
        bail!("sonde run produced no window reports:\n{log}");
    }
    let sum = |lines: &[&serde_json::Value], key: &str| {
        lines.iter().filter_map(|l| l[key].as_f64()).sum::<f64>()
    };
    let figure = |l: &serde_json::Value, key: &str| l["figures"][key].as_f64();
    let (otlp, pprof, samples, merged) = (
        sum(&wires, "otlp_gzip_bytes"),
        sum(&wires, "pprof_gzip_bytes"),
        sum(&wires, "samples"),
        sum(&wires, "otlp_gzip_bytes_threads_merged"),
    );
    let n = wires.len() as f64;
    let mib = |key: &str| -> Vec<f64> {
        windows
            .iter()
            .filter_map(|l| figure(l, key))
            .map(|b| b / 1048576.0)
            .collect()
    };
    let (rss, footprint) = (
        mib("agent_resident_memory_bytes"),
        mib("agent_footprint_bytes"),
    );
    // CPU seconds per second, in percent of one CPU.
    let cpu: Vec<f64> = windows
        .iter()
        .filter_map(|l| figure(l, "agent_cpu_usage"))
        .map(|c| 100.0 * c)
        .collect();
    // The agent's CPU plus its BPF programs' run time, as a share of the machine (the self-report's).
    let overhead: Vec<f64> = windows
        .iter()
        .filter_map(|l| figure(l, "overhead_cpu_ratio"))
        .map(|c| 100.0 * c)
        .collect();
    let total_samples: f64 = windows.iter().filter_map(|l| figure(l, "samples")).sum();
    println!(
        "## Daemon: 50 busy processes ({THREADED} with two threads), {minutes} min, 99 Hz, 10 s windows ({} windows)",
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
        "| OTLP bytes per window with each process's threads merged (what per-thread series cost) | {:.0} | | {:.2} |",
        merged / n,
        otlp / merged.max(1.0)
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
    let max = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    // The first window's CPU is 0 by definition (no earlier reading): left out of the means.
    let (cpu, overhead) = (&cpu[1.min(cpu.len())..], &overhead[1.min(overhead.len())..]);
    println!(
        "agent CPU: mean {:.2}% of one CPU = {:.3}% of the machine (max window {:.2}%); with BPF run time {:.3}% of the machine",
        avg(cpu),
        avg(cpu) / cpus() as f64,
        max(cpu),
        avg(overhead),
    );
    println!(
        "RSS first {:.1} MiB, last {:.1} MiB, max {:.1} MiB; footprint (RSS + BPF maps) first {:.1} MiB, last {:.1} MiB, max {:.1} MiB",
        rss.first().copied().unwrap_or(0.0),
        rss.last().copied().unwrap_or(0.0),
        max(&rss),
        footprint.first().copied().unwrap_or(0.0),
        footprint.last().copied().unwrap_or(0.0),
        max(&footprint),
    );
    // One reading a minute (six 10 s windows), to show whether memory settles.
    let curve: Vec<String> = rss
        .iter()
        .zip(&footprint)
        .enumerate()
        .filter(|(i, _)| (i + 1) % 6 == 0)
        .map(|(i, (r, f))| format!("{}:{r:.1}/{f:.1}", (i + 1) / 6))
        .collect();
    println!("RSS/footprint MiB by minute: {}", curve.join(" "));
    println!("(CPU includes encoding every window a second time for this size report.)");
    Ok(())
}

/// `sonde run` over four processes, one per kind of stack it walks: the C split (native tables), the
/// Python split (CPython frames), the Java split (HotSpot frames) and the Node.js split (V8 frames).
/// Each runtime adds its binaries' tables, its walker program and its symbol sources, so this is
/// the footprint of a node running a mix, window by window: RSS (anonymous and file-backed) plus
/// BPF maps.
pub(super) fn footprint(sonde: &Path, dir: &Path, seconds: u64) -> anyhow::Result<()> {
    let dir = dir.join("footprint");
    std::fs::create_dir_all(&dir)?;
    let busy = compile(
        &root().join("tests/workloads/cpu_split.c"),
        &dir.join("cpu_split"),
    )?;
    let classes = java::compile(&dir)?;
    let lasts = (seconds + 15).to_string();
    let workloads = root().join("tests/workloads");
    let mut commands = [
        Command::new(&busy),
        Command::new(python::PYTHON),
        Command::new(format!("{}/java", java::JDK)),
        Command::new(node::NODE),
    ];
    commands[0].arg(&lasts);
    commands[1]
        .arg(workloads.join("python/py_split.py"))
        .arg(&lasts);
    commands[2]
        .arg("-cp")
        .arg(&classes)
        .args(["Split", &lasts, "0"]);
    commands[3]
        .arg(workloads.join("node/split.js"))
        .args([&lasts, "0"]);
    let mut workers: Vec<Child> = commands
        .iter_mut()
        .map(|c| c.stdout(Stdio::null()).spawn())
        .collect::<Result<_, _>>()?;
    // The JVM and Node.js compile their hot code first: the agent starts on their steady state.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let json = dir.join("summary.jsonl");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(sonde)
        .args(["run", "--export-interval", "10", "--duration"])
        .arg(seconds.to_string())
        .arg("--summary-json")
        .arg(&json)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("SONDE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    let out = out?;
    let windows: Vec<serde_json::Value> = summary_lines(&json)
        .into_iter()
        .filter(|l| l["event"] == "window")
        .collect();
    if windows.is_empty() {
        bail!(
            "sonde run produced no window reports:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mib =
        |l: &serde_json::Value, key: &str| l["figures"][key].as_f64().unwrap_or(0.0) / 1048576.0;
    println!(
        "## Daemon footprint: a C loop, python3, a JVM and Node.js, {seconds} s, 10 s windows ({} windows)",
        windows.len()
    );
    println!("| window | RSS MiB | anonymous | file-backed | BPF maps MiB | footprint MiB |");
    println!("|---|---|---|---|---|---|");
    for (i, l) in windows.iter().enumerate() {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            i + 1,
            mib(l, "agent_resident_memory_bytes"),
            mib(l, "agent_anonymous_memory_bytes"),
            mib(l, "agent_file_memory_bytes"),
            mib(l, "bpf_map_memory_bytes"),
            mib(l, "agent_footprint_bytes"),
        );
    }
    let max = |key: &str| windows.iter().map(|l| mib(l, key)).fold(0.0, f64::max);
    let last = windows.last().expect("not empty");
    println!(
        "footprint max {:.1} MiB, last {:.1} MiB (target 64); peak RSS {:.1} MiB + max BPF maps {:.1} MiB = {:.1} MiB",
        max("agent_footprint_bytes"),
        mib(last, "agent_footprint_bytes"),
        mib(last, "agent_peak_resident_memory_bytes"),
        max("bpf_map_memory_bytes"),
        mib(last, "agent_peak_resident_memory_bytes") + max("bpf_map_memory_bytes"),
    );
    Ok(())
}

/// The JSON lines `sonde run --summary-json` wrote (none when the file is missing).
fn summary_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
