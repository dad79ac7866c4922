//! `sonde targets`: what a running agent profiles right now. Reads `/targets` on the agent's
//! metrics address (as `sonde status` reads `/metrics`) and prints each target: pid, kept or
//! dropped, frequency, its final labels and its discovery labels; `--json` prints the answer as
//! it came.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::{metadata::relabel::Labels, targets::TargetView};

/// Arguments of `sonde targets`.
#[derive(Debug, clap::Args)]
pub struct TargetsArgs {
    /// Where the agent serves its metrics (`sonde run --metrics-addr`).
    #[arg(long, default_value = crate::config::DEFAULT_METRICS_ADDR, value_name = "ADDR")]
    pub metrics_addr: String,
    /// Print the agent's JSON answer instead of the listing.
    #[arg(long)]
    pub json: bool,
    /// Only the kept targets.
    #[arg(long)]
    pub kept: bool,
}

/// Fetches and prints the targets; fails when no agent answers.
pub fn run(args: TargetsArgs) -> anyhow::Result<ExitCode> {
    let url = format!("http://{}/targets", args.metrics_addr);
    let body = crate::status::ask_agent(&args.metrics_addr, "/targets", "application/json")?;
    if args.json {
        println!("{body}");
        return Ok(ExitCode::SUCCESS);
    }
    let targets: Vec<TargetView> = serde_json::from_str(&body)
        .with_context(|| format!("{url} did not answer a list of targets: is it a sonde agent?"))?;
    let kept = targets.iter().filter(|t| t.kept).count();
    println!(
        "{} targets: {kept} kept, {} dropped",
        targets.len(),
        targets.len() - kept
    );
    for t in targets.iter().filter(|t| t.kept || !args.kept) {
        let state = if t.kept {
            format!("kept {} Hz", t.frequency_hz)
        } else {
            "dropped".to_owned()
        };
        println!("pid {:<8} {state}", t.pid);
        println!("  labels     {}", braces(&t.labels));
        println!("  discovered {}", braces(&t.discovery_labels));
    }
    Ok(ExitCode::SUCCESS)
}

/// `{name="value", ...}`, Prometheus's way of writing a label set.
fn braces(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}
