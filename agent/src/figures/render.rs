//! The human renderings of a window's figures: the `record` summary's `name: value` lines, the
//! daemon's one-line window log, and the OTLP heartbeat attributes. The JSON forms are
//! [`super::Figures::json`].

use super::{Figure, Figures, Kind, Source, Unit, Value};
use crate::metadata::{Tags, keys};

/// A value as a person reads it: shares in percent, counts whole, seconds to the millisecond.
fn human(figure: &Figure, v: f64) -> String {
    match (figure.kind, figure.unit) {
        (Kind::Ratio, _) => format!("{:.1}%", 100.0 * v),
        (_, Unit::Seconds) => format!("{v:.3}"),
        _ if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        _ => format!("{v:.3}"),
    }
}

/// `(name, value)` of each series of a figure: `name[label/values]` for run-time labels.
fn rendered<'a>(figure: &'a Figure, value: &'a Value) -> Vec<(String, String)> {
    match value {
        Value::One(v) => vec![(figure.name(), human(figure, *v))],
        Value::Labelled(series) => series
            .iter()
            .map(|(labels, v)| {
                (
                    format!("{}[{}]", figure.name(), labels.join("/")),
                    human(figure, *v),
                )
            })
            .collect(),
    }
}

/// The `record` summary: one `name: value` line per series of every figure, in catalogue order.
pub(crate) fn summary_lines(figures: &Figures) -> Vec<String> {
    figures
        .iter()
        .flat_map(|(f, value, _)| rendered(f, value))
        .map(|(name, value)| format!("{:<36}{value}", format!("{name}:")))
        .collect()
}

/// The daemon's window line: `name=value` of the logged figures.
pub(crate) fn log_line(figures: &Figures) -> String {
    figures
        .iter()
        .filter(|(f, _, _)| f.logged)
        .flat_map(|(f, value, _)| rendered(f, value))
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The agent's identity and the window's heartbeat figures, as OTLP resource attributes: a backend
/// counts instances reporting and their coverage from them, idle windows included. Counts are
/// integers, shares and rates decimals.
pub(crate) fn heartbeat(host: &str, figures: &Figures) -> Tags {
    let mut t = Tags::new();
    if !host.is_empty() {
        t.insert(keys::HOST_NAME, host);
    }
    t.insert("sonde.agent.version", env!("CARGO_PKG_VERSION"));
    for (f, value, _) in figures.iter() {
        if let Some(attribute) = f.heartbeat {
            let v = value.total();
            // Shares, rates and means stay decimals even when whole, so a backend sees one type.
            let text = match f.source {
                Source::Share { .. } => format!("{v:.4}"),
                Source::Rate { .. } | Source::Mean(_) | Source::KernelMean { .. } => {
                    format!("{v:.6}")
                }
                _ if v.fract() == 0.0 => format!("{v:.0}"),
                _ => format!("{v:.6}"),
            };
            t.insert(attribute, text);
        }
    }
    t
}
