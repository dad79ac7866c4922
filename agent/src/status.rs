//! `sonde status`: reads a running agent's `/metrics` and prints the operator's signal table for this
//! node, each row with a verdict. Exits non-zero when a row is a smoking gun, so it serves as a probe or
//! a runbook step.

use std::{collections::HashMap, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;

use crate::config::Thresholds;
use crate::figures::{self, Figure, Kind, live};

/// Arguments of `sonde status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Where the agent serves its metrics (`sonde run --metrics-addr`).
    #[arg(long, default_value = crate::config::DEFAULT_METRICS_ADDR, value_name = "ADDR")]
    pub metrics_addr: String,
    /// The agent's TOML configuration; its `[status]` table sets the thresholds.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// A row's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Normal,
    Suspect,
    SmokingGun,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Normal => "normal",
            Verdict::Suspect => "suspect",
            Verdict::SmokingGun => "smoking gun",
        }
    }

    /// Higher is worse.
    fn above(value: f64, suspect: f64, bad: f64) -> Self {
        if value > bad {
            Verdict::SmokingGun
        } else if value > suspect {
            Verdict::Suspect
        } else {
            Verdict::Normal
        }
    }

    /// Lower is worse.
    fn below(value: f64, suspect: f64, bad: f64) -> Self {
        if value < bad {
            Verdict::SmokingGun
        } else if value < suspect {
            Verdict::Suspect
        } else {
            Verdict::Normal
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    pub signal: &'static str,
    pub value: String,
    pub verdict: Verdict,
}

/// Samples of a Prometheus text exposition: `name{labels}` -> value, labels as written.
#[derive(Debug, Default)]
pub struct Scrape(HashMap<String, f64>);

impl Scrape {
    /// Parses the sample lines of Prometheus text format (comments skipped).
    pub fn parse(text: &str) -> Self {
        let mut samples = HashMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            if let Ok(v) = value.parse::<f64>() {
                samples.insert(series.to_owned(), v);
            }
        }
        Self(samples)
    }

    /// The value of `series` (`name` or `name{k="v"}`), 0 when absent.
    pub fn get(&self, series: &str) -> f64 {
        self.0.get(series).copied().unwrap_or(0.0)
    }

    /// Sum over every series of `name`.
    pub fn sum(&self, name: &str) -> f64 {
        self.series(name, "").sum()
    }

    /// Sum over the series of `name` whose labels include `label` (`reason="write_failed"`).
    pub fn sum_with(&self, name: &str, label: &str) -> f64 {
        self.series(name, label).sum()
    }

    /// Largest value over the series of `name` (one per sink), 0 when none.
    pub fn max(&self, name: &str) -> f64 {
        self.series(name, "").fold(0.0, f64::max)
    }

    fn series<'a>(&'a self, name: &'a str, label: &'a str) -> impl Iterator<Item = f64> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| match k.strip_prefix(name) {
                Some("") => label.is_empty(),
                Some(rest) => rest.starts_with('{') && rest.contains(label),
                None => false,
            })
            .map(|(_, v)| *v)
    }
}

/// The sample name of a window figure's first `/metrics` series, as the text format writes it
/// (`sonde_dropped_total{reason="oncpu_map_full"}`).
fn sample(figure: &Figure) -> String {
    let (family, labels) = figure
        .series()
        .into_iter()
        .next()
        .expect("the status table reads published figures");
    let total = if figure.kind == Kind::Counter {
        "_total"
    } else {
        ""
    };
    let unit = figure.name()[figure.key.len()..].to_owned();
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    match labels.is_empty() {
        true => format!("{family}{unit}{total}"),
        false => format!("{family}{unit}{total}{{{}}}", labels.join(",")),
    }
}

/// The thread context's row: samples read in spans, and reads that failed by reason.
fn spans_row(s: &Scrape) -> Row {
    use crate::runtimes::trace_context::figures as tc;
    let get = |key: &str| {
        figures::all()
            .find(|f| f.key == key)
            .map_or(0.0, |f| s.get(&sample(f)))
    };
    let (processes, labeled, torn, fault) = (
        get(tc::PROCESSES),
        get(tc::LABELED),
        get(tc::TORN),
        get(tc::FAULT),
    );
    let reads = labeled + get(tc::OUTSIDE) + torn + fault;
    let failed = if reads > 0.0 {
        100.0 * (torn + fault) / reads
    } else {
        0.0
    };
    Row {
        signal: "spans on samples",
        value: match processes > 0.0 {
            false => "no process publishes a thread context".into(),
            true => format!(
                "{processes:.0} processes, {labeled:.0} samples in spans; {torn:.0} torn, {fault:.0} unreadable ({failed:.1}%)"
            ),
        },
        verdict: Verdict::above(failed, 1.0, 10.0),
    }
}

/// The language runtimes' row: of the frames each runtime exported (every figure keyed
/// `<runtime>_frames_emitted`), the share it could name; a runtime that exported none is left out.
fn runtime_frames_row(s: &Scrape) -> Row {
    let get = |key: &str| {
        figures::all()
            .find(|f| f.key == key)
            .map_or(0.0, |f| s.get(&sample(f)))
    };
    let mut named: Vec<(&str, f64)> = figures::all()
        .filter_map(|f| f.key.strip_suffix("_frames_emitted"))
        .filter_map(|runtime| {
            let emitted = get(&format!("{runtime}_frames_emitted"));
            let unreadable = get(&format!("{runtime}_frames_unreadable"));
            (emitted > 0.0).then(|| (runtime, 100.0 * (1.0 - unreadable / emitted)))
        })
        .collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    let worst = named.iter().map(|(_, p)| *p).fold(100.0, f64::min);
    Row {
        signal: "language frames named",
        value: match named.is_empty() {
            true => "no language runtime's frames exported".into(),
            false => named
                .iter()
                .map(|(runtime, p)| format!("{runtime} {p:.1}%"))
                .collect::<Vec<_>>()
                .join(", "),
        },
        verdict: Verdict::below(worst, 95.0, 80.0),
    }
}

/// The signal table of a scrape.
pub fn rows(s: &Scrape, t: &Thresholds) -> Vec<Row> {
    let overhead = 100.0 * s.get(&sample(&figures::OVERHEAD_CPU_RATIO));
    let complete = 100.0 * s.get(&sample(&figures::COMPLETE_STACK_RATIO));
    let symbolized = 100.0 * s.get(&sample(&figures::SYMBOLIZED_FRAME_RATIO));
    let lost = s.get(&sample(&figures::LOST_SAMPLES));
    let samples = s.get(&sample(&figures::SAMPLES_CPU)) + s.get(&sample(&figures::SAMPLES_OFFCPU));
    let lost_percent = if lost + samples > 0.0 {
        100.0 * lost / (lost + samples)
    } else {
        0.0
    };
    // One series per sink: the worst sink's lag, every sink's deliveries and failures.
    let lag = s.max(&live::INGEST_LAG.sample());
    let undelivered = s.max(&live::OLDEST_UNDELIVERED.sample());
    let delivered = s.sum(&live::BATCHES_SENT.sample());
    let write_failed = s.sum_with(&live::DROPPED_BATCHES.sample(), r#"reason="write_failed""#);
    let retention = s.get(&live::LOCAL_RETENTION.sample());
    vec![
        Row {
            signal: "profiler CPU overhead",
            value: format!("{overhead:.2}%"),
            verdict: Verdict::above(overhead, t.overhead_percent_suspect, t.overhead_percent_bad),
        },
        Row {
            signal: "complete stacks",
            value: format!("{complete:.1}%"),
            verdict: Verdict::below(complete, t.complete_percent_suspect, t.complete_percent_bad),
        },
        Row {
            signal: "symbolized frame ratio",
            value: format!("{symbolized:.1}%"),
            verdict: Verdict::below(
                symbolized,
                t.symbolized_percent_suspect,
                t.symbolized_percent_bad,
            ),
        },
        Row {
            signal: "lost samples",
            value: format!("{lost:.0} ({lost_percent:.2}%)"),
            verdict: Verdict::above(lost_percent, t.lost_percent_suspect, t.lost_percent_bad),
        },
        Row {
            signal: "profile ingest lag",
            value: if delivered > 0.0 {
                format!("{lag:.1} s")
            } else {
                "no window delivered yet".into()
            },
            verdict: Verdict::above(lag, t.ingest_lag_seconds_suspect, t.ingest_lag_seconds_bad),
        },
        Row {
            signal: "oldest undelivered window",
            value: format!("{undelivered:.1} s"),
            verdict: Verdict::above(
                undelivered,
                t.undelivered_seconds_suspect,
                t.undelivered_seconds_bad,
            ),
        },
        Row {
            signal: "local retention",
            value: if retention > 0.0 {
                format!("{:.1} h kept", retention / 3600.0)
            } else {
                "none kept locally (OTLP: the backend retains)".into()
            },
            // Retention is the policy's to judge; a failing write is what makes it shrink here.
            verdict: if write_failed > 0.0 {
                Verdict::Suspect
            } else {
                Verdict::Normal
            },
        },
        runtime_frames_row(s),
        spans_row(s),
    ]
}

/// The body a running agent answers at `path` of its metrics address `addr` (what `sonde status`
/// and `sonde targets` ask), or an error that says how to reach one.
pub(crate) fn ask_agent(addr: &str, path: &str, accept: &str) -> anyhow::Result<String> {
    let url = format!("http://{addr}{path}");
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    agent
        .get(&url)
        .header("Accept", accept)
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .with_context(|| {
            format!(
                "no sonde agent answers on {url}: is `sonde run` running with --metrics-addr {addr}?"
            )
        })
}

/// Runs `sonde status`.
pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let thresholds = match &args.config {
        Some(path) => {
            crate::config::DaemonConfig::load(&crate::config::RunArgs {
                config: Some(path.clone()),
                ..Default::default()
            })?
            .status
        }
        None => Thresholds::default(),
    };
    let body = ask_agent(&args.metrics_addr, "/metrics", "text/plain")?;
    let rows = rows(&Scrape::parse(&body), &thresholds);
    println!("{:<28}{:<40}verdict", "signal", "value");
    for r in &rows {
        println!("{:<28}{:<40}{}", r.signal, r.value, r.verdict.as_str());
    }
    let worst = rows
        .iter()
        .map(|r| r.verdict)
        .max()
        .unwrap_or(Verdict::Normal);
    Ok(if worst == Verdict::SmokingGun {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_table_reads_as_the_seed_says() {
        assert_eq!(sample(&figures::LOST_SAMPLES), "sonde_lost_samples_total");
        assert_eq!(
            sample(&figures::SAMPLES_CPU),
            r#"sonde_samples_total{profile="cpu"}"#
        );
        let text = "# HELP x y\nsonde_overhead_cpu_ratio 0.014\nsonde_symbolized_frame_ratio 0.61\n\
                    sonde_complete_stack_ratio 0.95\nsonde_samples_total{profile=\"cpu\"} 1000\n\
                    sonde_export_batches_sent_total{sink=\"otlp\"} 3\n\
                    sonde_export_ingest_lag_seconds{sink=\"otlp\"} 45\n\
                    sonde_export_ingest_lag_seconds{sink=\"parca\"} 2\n";
        let rows = rows(&Scrape::parse(text), &Thresholds::default());
        let verdict = |name: &str| rows.iter().find(|r| r.signal == name).unwrap().verdict;
        assert_eq!(verdict("profiler CPU overhead"), Verdict::Normal);
        assert_eq!(verdict("symbolized frame ratio"), Verdict::SmokingGun);
        assert_eq!(verdict("profile ingest lag"), Verdict::Normal);
        assert_eq!(verdict("complete stacks"), Verdict::Normal);
        let spans = rows
            .iter()
            .find(|r| r.signal == "spans on samples")
            .unwrap();
        assert_eq!(spans.value, "no process publishes a thread context");
    }

    #[test]
    fn the_runtime_row_gives_each_runtime_its_named_share() {
        let rows_of = |text: &str| rows(&Scrape::parse(text), &Thresholds::default());
        let row = |rows: &[Row]| {
            let r = rows
                .iter()
                .find(|r| r.signal == "language frames named")
                .unwrap();
            (r.value.clone(), r.verdict)
        };
        assert_eq!(
            row(&rows_of("sonde_samples_total{profile=\"cpu\"} 10\n")),
            (
                "no language runtime's frames exported".into(),
                Verdict::Normal
            )
        );
        let text = "sonde_ruby_frames_emitted_total 1000\n\
                    sonde_ruby_frames_unreadable_total 150\n\
                    sonde_python_frames_emitted_total 400\n";
        assert_eq!(
            row(&rows_of(text)),
            ("python 100.0%, ruby 85.0%".into(), Verdict::Suspect)
        );
    }

    #[test]
    fn the_spans_row_counts_reads_that_failed() {
        let text = "sonde_trace_context_processes_total 2\n\
                    sonde_kernel_events_total{event=\"trace_context_labeled\"} 900\n\
                    sonde_kernel_events_total{event=\"trace_context_outside_span\"} 50\n\
                    sonde_kernel_events_total{event=\"trace_context_torn\"} 30\n\
                    sonde_kernel_events_total{event=\"trace_context_fault\"} 20\n";
        let rows = rows(&Scrape::parse(text), &Thresholds::default());
        let spans = rows
            .iter()
            .find(|r| r.signal == "spans on samples")
            .unwrap();
        assert_eq!(
            spans.value,
            "2 processes, 900 samples in spans; 30 torn, 20 unreadable (5.0%)"
        );
        assert_eq!(spans.verdict, Verdict::Suspect);
    }
}
