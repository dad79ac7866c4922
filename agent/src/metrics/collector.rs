//! Every metric the agent publishes, encoded at scrape time from the catalogue (`crate::figures`):
//! the last window's figures (counters as totals since start, gauges and ratios as last seen), the
//! export counters of every sink, and the agent's health. The README's "Self-metrics" table lists the
//! same families; a test checks both agree.

use std::sync::{Arc, Mutex};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, TypedMetric, counter::ConstCounter, gauge::ConstGauge},
};

use super::Health;
use crate::clock::unix_nanos_now;
use crate::figures::{self, Figures, Kind, Unit, Value, live};
use crate::{export::Destinations, export::ExportMetrics};

pub(super) type Labels = Vec<(&'static str, String)>;

/// Reads everything at scrape time.
#[derive(Debug)]
pub(super) struct AgentCollector {
    pub figures: Arc<Mutex<Figures>>,
    pub destinations: Destinations,
    pub health: Arc<Health>,
    pub local_dir: Option<std::path::PathBuf>,
}

/// Age of the oldest window in the local data directory: its index is appended in window order, so
/// the first line is the oldest. 0 when there is none.
fn local_retention_seconds(dir: &std::path::Path) -> f64 {
    use std::io::{BufRead as _, Read as _};
    let Ok(file) = std::fs::File::open(dir.join(crate::datadir::INDEX_FILE)) else {
        return 0.0;
    };
    let mut first = String::new();
    // One line is a few hundred bytes; a torn or foreign file reads as no retention.
    if std::io::BufReader::new(file.take(64 * 1024))
        .read_line(&mut first)
        .is_err()
    {
        return 0.0;
    }
    serde_json::from_str::<crate::datadir::IndexEntry>(&first).map_or(0.0, |e| {
        (unix_nanos_now() - e.start_unix_nanos).max(0) as f64 / 1e9
    })
}

/// A counter or gauge of either number type: whole counts stay integers on the wire.
enum Number {
    Counter(f64),
    Gauge(f64),
}

impl EncodeMetric for Number {
    fn encode(&self, encoder: prometheus_client::encoding::MetricEncoder) -> std::fmt::Result {
        match *self {
            Number::Counter(v) if v.fract() == 0.0 && (0.0..9e15).contains(&v) => {
                ConstCounter::new(v as u64).encode(encoder)
            }
            Number::Counter(v) => ConstCounter::new(v).encode(encoder),
            Number::Gauge(v) => ConstGauge::new(v).encode(encoder),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self {
            Number::Counter(_) => MetricType::Counter,
            Number::Gauge(_) => MetricType::Gauge,
        }
    }
}

/// One family's descriptor and series, gathered before it is written.
struct Family {
    name: String,
    kind: Kind,
    unit: Unit,
    help: &'static str,
    series: Vec<(Labels, f64)>,
}

impl Family {
    fn write(self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let metric_type = match self.kind {
            Kind::Counter => ConstCounter::<u64>::TYPE,
            Kind::Gauge | Kind::Ratio => ConstGauge::<f64>::TYPE,
        };
        let unit = self.unit.prometheus();
        let mut fam = enc.encode_descriptor(&self.name, self.help, unit.as_ref(), metric_type)?;
        for (labels, v) in self.series {
            let number = match self.kind {
                Kind::Counter => Number::Counter(v),
                Kind::Gauge | Kind::Ratio => Number::Gauge(v),
            };
            number.encode(fam.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The families of the window figures, in catalogue order: counters as totals, the rest as last seen.
fn window_families(figures: &Figures) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for (i, figure) in figures::all().enumerate() {
        let value = match figure.kind {
            Kind::Counter => figures.totals.get(i),
            Kind::Gauge | Kind::Ratio => figures.window.get(i),
        };
        // Before the first window every figure reads 0 (and labelled ones have no series yet).
        let series: Vec<(Labels, f64)> = match value {
            Some(Value::Labelled(series)) => series
                .iter()
                .map(|(values, v)| {
                    let labels = figure.labels().iter().copied().zip(values.iter().cloned());
                    (labels.collect(), *v)
                })
                .collect(),
            Some(Value::One(v)) => vec![(Vec::new(), *v)],
            None if figure.labels().is_empty() => vec![(Vec::new(), 0.0)],
            None => Vec::new(),
        };
        for (family, fixed) in figure.series() {
            let help = figures::families()
                .find(|(name, _)| *name == family)
                .map_or(figure.help, |(_, help)| help);
            let at = match out.iter().position(|f| f.name == family) {
                Some(at) => at,
                None => {
                    out.push(Family {
                        name: family,
                        kind: figure.kind,
                        unit: figure.unit,
                        help,
                        series: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            for (labels, v) in &series {
                let mut all: Labels = fixed.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
                all.extend(labels.iter().cloned());
                out[at].series.push((all, *v));
            }
        }
    }
    out
}

fn live(family: &live::Family, series: Vec<(Labels, f64)>) -> Family {
    Family {
        name: family.name.to_owned(),
        kind: family.kind,
        unit: family.unit,
        help: family.help,
        series,
    }
}

/// The export families: every counter of every sink's [`ExportMetrics`] and the queue, spool and lag
/// gauges, one series per sink (label `sink`). Summed over `sink`, a counter says what all sinks did.
fn export_families(destinations: &Destinations) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for d in destinations.iter() {
        for (name, reason, v) in d.exporter.metrics().snapshot() {
            let mut labels: Labels = vec![("sink", d.name.to_owned())];
            labels.extend(reason.map(|r| ("reason", r.to_owned())));
            match out.iter_mut().find(|f| f.name == name) {
                Some(f) => f.series.push((labels, v as f64)),
                None => {
                    // Every name is declared (a test checks it).
                    let declared = live::export_counter(name).copied().unwrap_or(live::Family {
                        name,
                        ..live::BATCHES_SENT
                    });
                    out.push(live(&declared, vec![(labels, v as f64)]));
                }
            }
        }
    }
    let per_sink = |value: &dyn Fn(&crate::export::Destination) -> f64| {
        destinations
            .iter()
            .map(|d| (vec![("sink", d.name.to_owned())], value(d)))
            .collect::<Vec<_>>()
    };
    let get = |d: &crate::export::Destination,
               f: fn(&ExportMetrics) -> &std::sync::atomic::AtomicU64| {
        ExportMetrics::get(f(d.exporter.metrics())) as f64
    };
    out.push(live(
        &live::QUEUED_BATCHES,
        per_sink(&|d| d.exporter.queued() as f64),
    ));
    out.push(live(
        &live::SPOOL_BATCHES,
        per_sink(&|d| get(d, |m| &m.spool_batches)),
    ));
    out.push(live(
        &live::SPOOL_BYTES,
        per_sink(&|d| get(d, |m| &m.spool_bytes)),
    ));
    out.push(live(
        &live::INGEST_LAG,
        per_sink(&|d| get(d, |m| &m.last_ingest_lag_ms) / 1e3),
    ));
    out.push(live(
        &live::OLDEST_UNDELIVERED,
        per_sink(&|d| {
            d.exporter
                .oldest_undelivered_end()
                .map_or(0.0, |end| (unix_nanos_now() - end).max(0) as f64 / 1e9)
        }),
    ));
    out
}

impl Collector for AgentCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let mut families = vec![live(
            &live::BUILD_INFO,
            vec![(vec![("version", env!("CARGO_PKG_VERSION").to_owned())], 1.0)],
        )];
        {
            let figures = self.figures.lock().unwrap_or_else(|e| e.into_inner());
            families.extend(window_families(&figures));
        }
        families.extend(export_families(&self.destinations));
        let retention = self
            .local_dir
            .as_deref()
            .map_or(0.0, local_retention_seconds);
        families.push(live(&live::LOCAL_RETENTION, vec![(Vec::new(), retention)]));
        let is_live = f64::from(u8::from(self.health.live()));
        families.push(live(&live::LIVE, vec![(Vec::new(), is_live)]));
        let stalls = self.health.stalls() as f64;
        families.push(live(&live::PIPELINE_STALLS, vec![(Vec::new(), stalls)]));
        for family in families {
            family.write(&mut enc)?;
        }
        Ok(())
    }
}
