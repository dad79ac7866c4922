//! `sonde diff`: differential profiling. Loads two profiles (pprof files, profiles selected from the
//! local data directory by tags and time, or merged profiles fetched from Pyroscope or Parca), normalises both to a common denominator, subtracts them per
//! function and ranks by change, so a regression is named by function. Needs no BPF and no privileges.
//!
//! Flow: [`datadir`] (optional selection) or `remote` (fetch) -> [`input`] (bounded read) -> [`load`] (decode, merge, intern)
//! -> [`normalise`] -> [`rank`] (change + binomial noise) -> [`output`] (table/JSON/CSV) and [`flame`]
//! (differential SVG).
//!
//! Inputs are untrusted (a release gate runs on profiles from anywhere): every read, decoded table and sum
//! is bounded or checked, and a violation is an error naming the file, never a wrapped number or an
//! exhausted host.

mod budget;
pub mod datadir;
pub mod error;
pub mod flame;
pub mod frames;
pub mod hash;
pub mod input;
pub mod load;
pub mod normalise;
pub mod output;
pub mod rank;
mod remote;
mod values;
pub mod wire;

use std::{
    fs::File,
    io::{BufWriter, Write as _},
    path::PathBuf,
    process::ExitCode,
};

use anyhow::Context as _;

pub use error::DiffError;
use load::Source;
use normalise::Normalisation;
use output::Format;

/// Exit status when `--fail-above` finds a regression.
pub const EXIT_GATE_TRIPPED: u8 = 3;

/// Rows shown by the table format when `--top` is not given.
const DEFAULT_TABLE_ROWS: usize = 40;

/// Arguments of `sonde diff`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("source").args(["data", "pyroscope", "parca"]))]
#[command(group = clap::ArgGroup::new("backend").args(["pyroscope", "parca"]))]
#[command(after_help = "\
INPUT FORMS:
  Files:    sonde diff --base A.pb.gz [B.pb.gz...] --new C.pb.gz [D.pb.gz...]
            Several files on one side are merged. Values are paths, always.
  Data dir: sonde diff --data DIR --base version=2.3 --new version=2.4 [--since T] [--until T]
            With --data, --base/--new take KEY=VALUE tag selectors (ANDed) matched against DIR/index.jsonl;
            version, service, host, region, pod, namespace are short for service.version, service.name,
            host.name, cloud.region, k8s.pod.name, k8s.namespace.name. Captures overlapping [--since, --until)
            are kept.
  Backends: sonde diff --pyroscope URL --base '{service_name=\"checkout\",version=\"2.3\"}'
                       --new '{service_name=\"checkout\",version=\"2.4\"}' [--since T] [--until T]
            sonde diff --parca URL --base '{...}' --new '{...}' [--since T] [--until T]
            --base/--new are label selectors, passed verbatim; each is fetched as one profile merged over
            [--since, --until) (default: the last hour), of --profile-type. Pyroscope (its HTTP port,
            http://pyroscope:4040) is asked SelectMergeProfile over the Connect protocol, type default
            process_cpu:cpu:nanoseconds:cpu:nanoseconds; --tenant-id sets X-Scope-OrgID. Parca (gRPC,
            http://parca:7070) is asked Query in merge mode; a selector starting with `{` is prefixed with
            the type, default process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta. $SONDE_PYROSCOPE_TOKEN or
            $SONDE_PARCA_TOKEN, if set, is sent as a bearer token.
  Several values on one side are merged. T is RFC 3339 (2026-01-31T12:00:00Z), Unix seconds, `now` or
  `now-<N><s|m|h|d>` (now-30m).

NORMALISATION: shares of each side's total by default; --base-requests/--new-requests for value per request;
--per-cpu-second for value per second of capture. Rows are ranked by the absolute change of the normalised
self value. A change within --noise-sigma binomial standard errors of zero is marked `noise`.

LIMITS: each input may be at most --max-input-mib compressed and decompressed, and decode to at most as
much memory; only regular files and `-` (standard input, once) are read. A sample must carry one value per
sample type, none negative: --lenient skips and counts those that do not.

EXIT STATUS: 0 ok, 1 error, 3 --fail-above tripped (offenders are printed on stderr).")]
pub struct DiffArgs {
    /// Baseline: gzip pprof files, KEY=VALUE selectors with --data, label selectors with --pyroscope or
    /// --parca.
    #[arg(long, value_name = "FILE|SELECTOR", num_args = 1.., required = true, action = clap::ArgAction::Append)]
    pub base: Vec<String>,
    /// Profile to compare against the baseline: gzip pprof files, KEY=VALUE selectors with --data, label
    /// selectors with --pyroscope or --parca.
    #[arg(long, value_name = "FILE|SELECTOR", num_args = 1.., required = true, action = clap::ArgAction::Append)]
    pub new: Vec<String>,
    /// sonde's local data directory (with index.jsonl); makes --base/--new tag selectors.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Pyroscope's URL (its HTTP port); makes --base/--new label selectors fetched from it.
    #[arg(long, value_name = "URL")]
    pub pyroscope: Option<String>,
    /// Parca's URL (gRPC); makes --base/--new queries fetched from it.
    #[arg(long, value_name = "URL")]
    pub parca: Option<String>,
    /// With --pyroscope/--parca: the profile type queried (Pyroscope's profile type id; Parca's prefix of a
    /// selector starting with `{`).
    #[arg(long, value_name = "ID", requires = "backend")]
    pub profile_type: Option<String>,
    /// With --pyroscope: the tenant (header X-Scope-OrgID).
    #[arg(
        long,
        value_name = "TENANT",
        requires = "pyroscope",
        conflicts_with = "parca"
    )]
    pub tenant_id: Option<String>,
    /// With --data: only captures ending after this time; with --pyroscope/--parca: start of the merged
    /// range (default now-1h).
    #[arg(long, value_name = "TIME", requires = "source")]
    pub since: Option<String>,
    /// With --data: only captures starting before this time; with --pyroscope/--parca: end of the merged
    /// range (default now).
    #[arg(long, value_name = "TIME", requires = "source")]
    pub until: Option<String>,
    /// Sample type to compare (cpu, samples, offcpu, events); default cpu, else the first of the first file.
    #[arg(long, value_name = "TYPE")]
    pub sample_type: Option<String>,
    /// Requests served during the base capture(s); normalise to value per request.
    #[arg(long, value_name = "N", requires = "new_requests", value_parser = positive)]
    pub base_requests: Option<f64>,
    /// Requests served during the new capture(s); normalise to value per request.
    #[arg(long, value_name = "M", requires = "base_requests", value_parser = positive)]
    pub new_requests: Option<f64>,
    /// Normalise to value per second of capture, using the profiles' durations.
    #[arg(long, conflicts_with = "base_requests")]
    pub per_cpu_second: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Rows to print, largest change first; 0 for all. Default: 40 for the table, all for JSON/CSV.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Also write a differential flame graph of the new profile, coloured by change, to this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Compare only the samples carrying this label on both sides (`span_name=checkout`,
    /// `trace_id=...`, a Go pprof label): what one operation costs, release against release.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub label: Option<(String, String)>,
    /// Merge every function seen inlined (in either profile) into its caller, so a change in inlining
    /// does not move cost between frames.
    #[arg(long)]
    pub fold_inlined: bool,
    /// Exit with status 3 if a function's self share grew by more than PCT points beyond the noise margin.
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Standard errors within which a change counts as noise.
    #[arg(long, value_name = "SIGMA", default_value_t = 2.0)]
    pub noise_sigma: f64,
    /// Largest input, in MiB: compressed bytes, decompressed bytes and decoded tables, each (and the index
    /// with --data).
    #[arg(long, value_name = "MIB", default_value_t = input::Limits::DEFAULT_MAX_INPUT_MIB,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_input_mib: u64,
    /// Skip samples whose values do not match the sample types (too few, too many, negative) and report
    /// how many, instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// With --data: refuse an index with a line that does not parse or names a missing file, instead of
    /// skipping that line with a warning.
    #[arg(long, requires = "data")]
    pub strict: bool,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!(
            "`{s}` is not KEY=VALUE (a label's key and value, as span_name=checkout)"
        )),
    }
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

/// The inputs of both sides: the files named, what the data-dir selectors pick, or what the backend
/// answers to the selectors.
fn input_files(args: &DiffArgs) -> Result<(Vec<Source>, Vec<Source>), DiffError> {
    if let Some(url) = &args.pyroscope {
        return remote::fetch_sides(args, remote::Backend::Pyroscope, url, limits(args));
    }
    if let Some(url) = &args.parca {
        return remote::fetch_sides(args, remote::Backend::Parca, url, limits(args));
    }
    let files = |paths: Vec<PathBuf>| paths.into_iter().map(Source::File).collect();
    let Some(dir) = &args.data else {
        let paths = |v: &[String]| files(v.iter().map(PathBuf::from).collect());
        return Ok((paths(&args.base), paths(&args.new)));
    };
    // Times first: a typo in them is cheaper to report than the index is to read.
    let since = args.since.as_deref().map(datadir::parse_time).transpose()?;
    let until = args.until.as_deref().map(datadir::parse_time).transpose()?;
    let index = datadir::read_index(dir, limits(args), args.strict)?;
    if !index.skipped.is_empty() {
        for reason in &index.skipped {
            eprintln!("sonde: warning: {reason}");
        }
        eprintln!(
            "sonde: warning: {} index line(s) skipped; --strict refuses such a directory",
            index.skipped.len()
        );
    }
    let entries = index.entries;
    let kind = match args.sample_type.as_deref() {
        Some("offcpu" | "events") => crate::profile::model::ProfileKind::OffCpu,
        _ => crate::profile::model::ProfileKind::Cpu,
    };
    let select = |side, raw: &[String]| {
        datadir::select(
            dir,
            &entries,
            &datadir::Query {
                side,
                raw,
                kind,
                since,
                until,
            },
        )
    };
    Ok((select("base", &args.base)?, select("new", &args.new)?))
}

fn limits(args: &DiffArgs) -> input::Limits {
    input::Limits {
        max_input_mib: args.max_input_mib,
    }
}

/// Runs `sonde diff`.
pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let (base_files, new_files) = input_files(&args)?;
    let options = load::LoadOptions {
        sample_type: args.sample_type.as_deref(),
        fold_inlined: args.fold_inlined,
        limits: limits(&args),
        lenient: args.lenient,
        label: args.label.as_ref().map(|(k, v)| (k.as_str(), v.as_str())),
    };
    let started = std::time::Instant::now();
    let loaded = load::load_sides(&base_files, &new_files, options)?;
    tracing::debug!(elapsed = ?started.elapsed(), functions = loaded.names.len(), "loaded both sides");
    let normalisation = match (args.base_requests, args.new_requests, args.per_cpu_second) {
        (Some(base), Some(new), _) => Normalisation::PerRequest { base, new },
        (_, _, true) => Normalisation::PerSecond,
        _ => Normalisation::Shares,
    };
    let factors = normalisation.factors(&loaded.base, &loaded.new)?;
    for warning in normalise::warnings(&loaded, normalisation) {
        eprintln!("sonde: warning: {warning}");
    }
    let diff = rank::rank(&loaded, normalisation, factors, args.noise_sigma);
    tracing::debug!(elapsed = ?started.elapsed(), rows = diff.rows.len(), "ranked");

    let top = match (args.top, args.format) {
        (Some(0), _) | (None, Format::Json | Format::Csv) => None,
        (Some(n), _) => Some(n),
        (None, Format::Table) => Some(DEFAULT_TABLE_ROWS),
    };
    let context = output::Context {
        sample_type: loaded.sample_type.clone(),
        unit: loaded.unit.clone(),
    };
    let mut stdout = BufWriter::new(std::io::stdout().lock());
    output::write(&diff, &context, args.format, top, &mut stdout)
        .context("writing the diff to stdout")?;
    stdout.flush().context("writing the diff to stdout")?;

    if let Some(path) = &args.flamegraph {
        let lines = flame::differential_lines(&loaded, factors, limits(&args).max_input_bytes())?;
        tracing::debug!(elapsed = ?started.elapsed(), lines = lines.len(), "differential stacks folded");
        let file = File::create(path).map_err(|source| DiffError::Write {
            path: path.clone(),
            source,
        })?;
        let title = format!(
            "sonde diff ({}, {})",
            loaded.sample_type,
            normalisation.describe()
        );
        let mut out = BufWriter::new(file);
        flame::write_svg(&lines, &title, &loaded.unit, &mut out)
            .and_then(|()| out.flush())
            .map_err(|source| DiffError::Write {
                path: path.clone(),
                source,
            })?;
    }

    tracing::debug!(elapsed = ?started.elapsed(), "output written");

    if let Some(pct) = args.fail_above {
        let offenders = diff.gate(pct);
        if !offenders.is_empty() {
            eprintln!(
                "sonde: release gate: {} function(s) grew by more than {pct} points of self share beyond noise \
                 ({} sigma):",
                offenders.len(),
                args.noise_sigma
            );
            for r in offenders {
                eprintln!(
                    "  {:+.2} points (±{:.2}) {:.2}% -> {:.2}%  {}",
                    r.delta_self_pct,
                    args.noise_sigma * r.self_standard_error_pct,
                    r.base_self_pct,
                    r.new_self_pct,
                    r.function
                );
            }
            return Ok(ExitCode::from(EXIT_GATE_TRIPPED));
        }
    }
    Ok(ExitCode::SUCCESS)
}
