//! `sonde unwind-table FILE...` (hidden): builds the unwind table of each binary as the agent would and
//! prints its size and build time, for the benchmark and for checking a binary sonde unwinds badly.

use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::Context as _;

use crate::bpf::unwind_maps::{BLOCK_BYTES, PAGE_ENTRY_BYTES};

use super::{layout::layout, table};

/// Distinct rules as the store numbers them (one numbering for every binary printed).
#[derive(Default)]
struct Rules(std::collections::HashMap<sonde_abi::UnwindRule, u16>);

/// Arguments of `sonde unwind-table`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// Binaries (executables or shared libraries).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Prints one line per binary: its CFI, rows by kind, kernel bytes (whole blocks of rows and the page
/// entries), page entries, rules and build milliseconds.
pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let mut rules = Rules::default();
    for path in &args.files {
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot open {}: check the path", path.display()))?;
        let started = Instant::now();
        let built = table::build_file(&file).with_context(|| path.display().to_string())?;
        let before = rules.0.len();
        let laid_out = layout(&built.rows, &mut |rule| {
            let next = u16::try_from(rules.0.len()).ok()?;
            Some(*rules.0.entry(rule).or_insert(next))
        })
        .map_err(|_| anyhow::anyhow!("more than 65536 distinct unwind rules"))?;
        let new_rules = rules.0.len() - before;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let stats = built.stats;
        println!(
            "{} source={:?} fdes={} bad_fdes={} rows={} unsupported_rows={} plt_rows={} signal_rows={} end_rows={} bytes={} pages={} rules={} new_rules={new_rules} build_ms={ms:.1}",
            path.display(),
            stats.source,
            stats.fdes,
            stats.bad_fdes,
            stats.rows,
            stats.unsupported_rows,
            stats.plt_rows,
            stats.signal_rows,
            stats.end_rows,
            laid_out.blocks.len() as u64 * BLOCK_BYTES
                + laid_out.pages.len() as u64 * PAGE_ENTRY_BYTES,
            laid_out.pages.len(),
            laid_out
                .blocks
                .iter()
                .flatten()
                .map(|r| r.rule)
                .collect::<std::collections::HashSet<_>>()
                .len(),
        );
    }
    Ok(ExitCode::SUCCESS)
}
