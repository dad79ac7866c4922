//! The restart part of the short-lived processes section: `sonde run` twice on one data directory
//! over the build loop, so the second run finds the tables the first saved
//! (`<data dir>/unwind-tables`). Per run, from its first window: tables built and loaded from disk,
//! the seconds spent building, and the share of walks reaching a thread root.

use std::{path::Path, process::Command};

use anyhow::{Context as _, ensure};

use super::Loop;

/// What one run's first window says.
pub(super) struct Restart {
    built: f64,
    from_disk: f64,
    build_seconds: f64,
    walk_root_ratio: f64,
}

/// Seconds per run (one window of this length).
const WINDOW_SECONDS: u64 = 6;

/// Runs `sonde run` twice on a fresh data directory in `dir`, the build loop running throughout.
pub(super) fn measure(sonde: &Path, sources: &Path, dir: &Path) -> anyhow::Result<[Restart; 2]> {
    let data = dir.join("restart-data");
    let _ = std::fs::remove_dir_all(&data);
    let _build = Loop::start(sources)?;
    std::thread::sleep(super::WARM_UP);
    let run = |n: usize| -> anyhow::Result<Restart> {
        let summary = dir.join(format!("restart-{n}.jsonl"));
        let _ = std::fs::remove_file(&summary);
        let status = Command::new(sonde)
            .arg("run")
            .arg("--data-dir")
            .arg(&data)
            .args(["--duration", &WINDOW_SECONDS.to_string()])
            .args(["--export-interval", &WINDOW_SECONDS.to_string()])
            .arg("--summary-json")
            .arg(&summary)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(
                dir.join(format!("restart-{n}.stderr")),
            )?)
            .status()
            .context("running sonde run")?;
        ensure!(status.success(), "sonde run {n} failed ({status})");
        let text = std::fs::read_to_string(&summary)?;
        let window = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["event"] == "window")
            .with_context(|| format!("no window in {}", summary.display()))?;
        let figure = |key: &str| window["figures"][key].as_f64().unwrap_or(f64::NAN);
        Ok(Restart {
            built: figure("unwind_tables_built"),
            from_disk: figure("unwind_tables_from_disk"),
            build_seconds: figure("unwind_build_seconds"),
            walk_root_ratio: figure("walk_root_ratio"),
        })
    };
    Ok([run(1)?, run(2)?])
}

/// Prints the two runs.
pub(super) fn print(runs: &[Restart; 2]) {
    println!(
        "\nRestart: `sonde run` twice on one data directory over the build loop, first window \
         ({WINDOW_SECONDS} s) of each.\n"
    );
    println!("| run | tables built | tables from disk | build s | walks reaching a root |");
    println!("|---|---|---|---|---|");
    for (n, r) in runs.iter().enumerate() {
        println!(
            "| {} | {:.0} | {:.0} | {:.3} | {:.1}% |",
            if n == 0 {
                "first (empty directory)"
            } else {
                "second (restart)"
            },
            r.built,
            r.from_disk,
            r.build_seconds,
            100.0 * r.walk_root_ratio
        );
    }
}
