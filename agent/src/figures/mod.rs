//! The one catalogue of the agent's own figures, in the manner of the OpenTelemetry eBPF profiler's
//! `metrics/metrics.json`: every counter, gauge and ratio is declared once ([`catalogue`] for what
//! userspace counts, [`kernel`] for each `sonde_abi::stat` counter, [`live`] for what `/metrics` reads
//! at scrape time), with its name, kind, unit, help, where `/metrics` publishes it and whether the
//! heartbeat and the window log carry it. Each window's figures are computed once, from the window's
//! stats, into [`Figures`] ([`input::Running`]); `/metrics`, the `record` summary (text and JSON), the
//! daemon's window log (text and JSON), the OTLP heartbeat and `sonde status` all render that one
//! structure, so a figure has one name and one value everywhere.
//!
//! Adding a figure is one declaration: a kernel counter in `kernel.rs` (its array is as long as
//! `stat::COUNT`, so a new counter does not compile until it is declared), anything else in
//! `catalogue.rs`, reading its value from [`Input`] (the window, its coverage, the agent's usage).

mod catalogue;
pub(crate) mod coverage;
mod input;
mod kernel;
pub(crate) mod live;
mod render;
mod usage;

use std::sync::LazyLock;

pub(crate) use catalogue::*;

use crate::runtimes::{
    Runtime, RuntimeCounts,
    figures::{Read, RuntimeFigure},
    registry,
};
pub(crate) use input::{Input, Running};
pub(crate) use render::{heartbeat, log_line, summary_lines};
pub(crate) use usage::{Usage, online_cpus};

/// What a figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Events: per window in reports, summed over windows in `/metrics` (`_total`).
    Counter,
    /// A level at the end of the window, or a rate over it.
    Gauge,
    /// A share of good outcomes (or of defects) in the window, by the one rule of [`crate::ratio`].
    Ratio,
}

/// The base unit of a figure; it ends its name (`_bytes`, `_seconds`), as Prometheus wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A count or a ratio.
    None,
    Bytes,
    Seconds,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Bytes => "_bytes",
            Unit::Seconds => "_seconds",
        }
    }

    /// The unit as prometheus-client names it.
    pub(crate) fn prometheus(self) -> Option<prometheus_client::registry::Unit> {
        match self {
            Unit::None => None,
            Unit::Bytes => Some(prometheus_client::registry::Unit::Bytes),
            Unit::Seconds => Some(prometheus_client::registry::Unit::Seconds),
        }
    }
}

/// One series of a shared `/metrics` family: the family and this series' fixed labels (the type the
/// runtimes declare theirs with).
pub(crate) use crate::runtimes::figures::Series;

/// Where `/metrics` publishes a figure.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Publish {
    /// Its own family, `sonde_<key>` (a kernel counter: `sonde_kernel_events{event="<key>"}`).
    Own,
    /// These series of shared families (declared in [`catalogue::FAMILIES`]); a kernel counter is
    /// also in `sonde_kernel_events`.
    In(&'static [Series]),
    /// Nowhere: the figure is a sum or complement of published series (said in its help).
    Not,
}

/// How a figure's value is read from a window.
#[derive(Clone, Copy)]
pub(crate) enum Source {
    /// A kernel counter's increase in the window (`sonde_abi::stat`).
    Kernel(u32),
    /// A count of the window.
    Count(fn(&Input) -> f64),
    /// A count since start (the components' cumulative counters): reported as its increase.
    SoFar(fn(&Input) -> f64),
    /// A level at the end of the window.
    Now(fn(&Input) -> f64),
    /// Part and whole of the window: `good` shares are 1 on an empty window, defect shares 0.
    Share {
        read: fn(&Input) -> (u64, u64),
        good: bool,
    },
    /// Sum over count (frames per stack), 0 when the count is 0.
    Mean(fn(&Input) -> (f64, f64)),
    /// A runtime's cumulative count (`crate::runtimes::RuntimeCounts`): reported as its increase.
    Runtime {
        runtime: Runtime,
        read: fn(&RuntimeCounts) -> u64,
    },
    /// One kernel counter's increase over another's in the window, 0 when the second's is 0.
    KernelMean { sum: u32, count: u32 },
    /// The increase of a count since start per second of the window (per CPU with `per_cpu`); 0 on
    /// the first window, which has no earlier reading.
    Rate {
        so_far: fn(&Input) -> f64,
        per_cpu: bool,
    },
    /// Series with labels known only at run time (programs, services, refused inputs): the label
    /// names, and each series' label values and value; counters are read since start.
    Labelled {
        labels: &'static [&'static str],
        read: fn(&Input) -> LabelledSeries,
    },
}

/// One declared figure.
#[derive(Clone, Copy)]
pub(crate) struct Figure {
    /// Snake-case name without unit; reports use [`Figure::name`].
    pub key: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    /// One sentence: `/metrics` help, and the README's table.
    pub help: &'static str,
    pub publish: Publish,
    /// The OTLP resource attribute carrying it on every request (the heartbeat), if any.
    pub heartbeat: Option<&'static str>,
    /// Whether the daemon's one-line window log shows it (the JSON log has every figure).
    pub logged: bool,
    pub source: Source,
}

impl Figure {
    /// The name in every report: the key and its unit (`unwind_table_memory_bytes`).
    pub(crate) fn name(&self) -> String {
        format!("{}{}", self.key, self.unit.suffix())
    }

    /// Where it goes in `/metrics`: (family, fixed labels) of each series.
    pub(crate) fn series(&self) -> Vec<(String, Vec<(&'static str, &'static str)>)> {
        let own = || match self.source {
            Source::Kernel(_) => ("sonde_kernel_events".to_owned(), vec![("event", self.key)]),
            _ => (format!("sonde_{}", self.key), Vec::new()),
        };
        match self.publish {
            Publish::Own => vec![own()],
            Publish::In(series) => {
                let mut out: Vec<_> = series
                    .iter()
                    .map(|s| (s.family.to_owned(), s.labels.to_vec()))
                    .collect();
                if matches!(self.source, Source::Kernel(_)) {
                    out.push(own());
                }
                out
            }
            Publish::Not => Vec::new(),
        }
    }

    /// The label names of a figure with run-time labels.
    pub(crate) fn labels(&self) -> &'static [&'static str] {
        match self.source {
            Source::Labelled { labels, .. } => labels,
            _ => &[],
        }
    }

    const fn new(key: &'static str, kind: Kind, help: &'static str, source: Source) -> Self {
        Self {
            key,
            kind,
            unit: Unit::None,
            help,
            publish: Publish::Own,
            heartbeat: None,
            logged: false,
            source,
        }
    }

    /// Published as these series of shared families.
    pub(crate) const fn at(mut self, series: &'static [Series]) -> Self {
        self.publish = Publish::In(series);
        self
    }

    /// Not published (a sum or complement of published series).
    pub(crate) const fn unpublished(mut self) -> Self {
        self.publish = Publish::Not;
        self
    }

    pub(crate) const fn unit(mut self, unit: Unit) -> Self {
        self.unit = unit;
        self
    }

    pub(crate) const fn heartbeat(mut self, attribute: &'static str) -> Self {
        self.heartbeat = Some(attribute);
        self
    }

    pub(crate) const fn logged(mut self) -> Self {
        self.logged = true;
        self
    }
}

/// A counter of the window's count.
pub(crate) const fn count(
    key: &'static str,
    help: &'static str,
    read: fn(&Input) -> f64,
) -> Figure {
    Figure::new(key, Kind::Counter, help, Source::Count(read))
}

/// A counter read from a component's cumulative count.
pub(crate) const fn so_far(
    key: &'static str,
    help: &'static str,
    read: fn(&Input) -> f64,
) -> Figure {
    Figure::new(key, Kind::Counter, help, Source::SoFar(read))
}

/// A gauge: a level at the end of the window.
pub(crate) const fn now(key: &'static str, help: &'static str, read: fn(&Input) -> f64) -> Figure {
    Figure::new(key, Kind::Gauge, help, Source::Now(read))
}

/// A share of good outcomes (1 on an empty window).
pub(crate) const fn good_share(
    key: &'static str,
    help: &'static str,
    read: fn(&Input) -> (u64, u64),
) -> Figure {
    Figure::new(key, Kind::Ratio, help, Source::Share { read, good: true })
}

/// A share of defects (0 on an empty window).
pub(crate) const fn defect_share(
    key: &'static str,
    help: &'static str,
    read: fn(&Input) -> (u64, u64),
) -> Figure {
    Figure::new(key, Kind::Ratio, help, Source::Share { read, good: false })
}

/// A gauge: sum / count over the window.
pub(crate) const fn mean(
    key: &'static str,
    help: &'static str,
    read: fn(&Input) -> (f64, f64),
) -> Figure {
    Figure::new(key, Kind::Gauge, help, Source::Mean(read))
}

/// A gauge: a cumulative count's increase per second (and per CPU) over the window.
pub(crate) const fn rate(
    key: &'static str,
    help: &'static str,
    so_far: fn(&Input) -> f64,
    per_cpu: bool,
) -> Figure {
    Figure::new(key, Kind::Gauge, help, Source::Rate { so_far, per_cpu })
}

/// Series with run-time labels; `kind` says whether they count (read since start) or are levels.
pub(crate) const fn labelled(
    key: &'static str,
    kind: Kind,
    help: &'static str,
    labels: &'static [&'static str],
    read: fn(&Input) -> LabelledSeries,
) -> Figure {
    Figure::new(key, kind, help, Source::Labelled { labels, read })
}

/// Every figure computed per window: the userspace ones, the runtimes', then one per kernel counter.
pub(crate) fn all() -> impl Iterator<Item = &'static Figure> {
    catalogue::WINDOW
        .iter()
        .chain(RUNTIMES.iter())
        .chain(kernel::KERNEL.iter())
}

/// The shared families' help: the catalogue's and the runtimes'.
pub(crate) fn families() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    catalogue::FAMILIES
        .iter()
        .chain(registry::RUNTIMES.iter().flat_map(|r| r.families.iter()))
}

/// The runtimes' figures (each runtime's `Registration`), as the catalogue's.
static RUNTIMES: LazyLock<Vec<Figure>> = LazyLock::new(|| {
    registry::RUNTIMES
        .iter()
        .flat_map(|r| r.figures.iter().map(|f| runtime_figure(r.runtime, f)))
        .collect()
});

fn runtime_figure(runtime: Runtime, f: &RuntimeFigure) -> Figure {
    let (kind, source) = match f.read {
        Read::Kernel(stat) => (Kind::Counter, Source::Kernel(stat)),
        Read::SoFar(read) => (Kind::Counter, Source::Runtime { runtime, read }),
        Read::Mean { sum, count } => (Kind::Gauge, Source::KernelMean { sum, count }),
    };
    let figure = Figure::new(f.key, kind, f.help, source);
    match f.series {
        [] => figure,
        series => figure.at(series),
    }
}

/// The series of a figure with run-time labels: label values (in the figure's label order), value.
pub(crate) type LabelledSeries = Vec<(Vec<String>, f64)>;

/// A figure's value in one window.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    One(f64),
    /// Label values (in the figure's label order) and value of each series.
    Labelled(Vec<(Vec<String>, f64)>),
}

impl Value {
    /// The single value (the sum over series of a labelled figure).
    pub(crate) fn total(&self) -> f64 {
        match self {
            Value::One(v) => *v,
            Value::Labelled(series) => series.iter().map(|(_, v)| v).sum(),
        }
    }
}

/// The figures of one window, in the order of [`all`], with their totals since start (what
/// `/metrics` publishes for counters).
#[derive(Clone, Debug, Default)]
pub(crate) struct Figures {
    pub(crate) window: Vec<Value>,
    pub(crate) totals: Vec<Value>,
}

impl Figures {
    /// The window's value of `figure` (summed over series), 0 when it is not in the catalogue.
    #[cfg(test)]
    pub(crate) fn get(&self, figure: &Figure) -> f64 {
        all()
            .position(|f| f.key == figure.key)
            .and_then(|i| self.window.get(i))
            .map_or(0.0, Value::total)
    }

    /// Every figure with its window value and total.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'static Figure, &Value, &Value)> {
        all()
            .zip(&self.window)
            .zip(&self.totals)
            .map(|((f, w), t)| (f, w, t))
    }

    /// The window's figures as one JSON object, by [`Figure::name`]: numbers, and objects keyed by
    /// label values joined with `/` for figures with run-time labels.
    pub(crate) fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        let number = |v: f64| {
            serde_json::Number::from_f64(v)
                .map_or(serde_json::Value::Null, serde_json::Value::Number)
        };
        self.iter()
            .map(|(f, value, _)| {
                let v = match value {
                    Value::One(v) => number(*v),
                    Value::Labelled(series) => serde_json::Value::Object(
                        series
                            .iter()
                            .map(|(labels, v)| (labels.join("/"), number(*v)))
                            .collect(),
                    ),
                };
                (f.name(), v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
