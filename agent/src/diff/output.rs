//! Renders a [`Diff`] as an aligned table, JSON or CSV.

use std::io::{self, Write};

use serde::Serialize;

use super::rank::{Diff, Row, SideTotals};

/// Output format of the ranked rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// One JSON object with `rows` and `totals`.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

/// What is being compared, for the output header.
#[derive(Clone, Debug, Serialize)]
pub struct Context {
    /// `name/unit` of the compared sample type.
    pub sample_type: String,
    /// Unit of the values.
    pub unit: String,
}

/// Writes the first `top` rows (all when `None`) of `diff` in `format`.
pub fn write(
    diff: &Diff,
    context: &Context,
    format: Format,
    top: Option<usize>,
    out: &mut impl Write,
) -> io::Result<()> {
    let rows = &diff.rows[..top.unwrap_or(usize::MAX).min(diff.rows.len())];
    match format {
        Format::Table => table(diff, context, rows, out),
        Format::Json => json(diff, context, rows, out),
        Format::Csv => csv(diff, rows, out),
    }
}

/// Formats a normalised value with four significant digits.
fn sig(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

fn table(diff: &Diff, context: &Context, rows: &[Row], out: &mut impl Write) -> io::Result<()> {
    let (b, n) = (&diff.base, &diff.new);
    writeln!(
        out,
        "sample type {}, normalised as {}; base {:.0} samples in {} file(s), new {:.0} samples in {} file(s)",
        context.sample_type,
        diff.normalisation.describe(),
        b.samples,
        b.files,
        n.samples,
        n.files
    )?;
    let per = diff.normalisation.suffix().map(|s| s.replace('_', " "));
    if let Some(per) = &per {
        writeln!(
            out,
            "total {} {per}: base {}, new {}",
            context.unit,
            sig(b.normalised),
            sig(n.normalised)
        )?;
    }
    write!(
        out,
        "{:>9} {:>9} {:>8} {:>7} {:>10} {:>9} {:>8}",
        "BASE SELF", "NEW SELF", "Δ SELF", "±NOISE", "BASE TOTAL", "NEW TOTAL", "Δ TOTAL"
    )?;
    if per.is_some() {
        write!(
            out,
            " {:>12} {:>12} {:>12} {:>12}",
            "BASE SELF/", "NEW SELF/", "Δ SELF/", "±NOISE/"
        )?;
    }
    writeln!(out, "  {:<6} FUNCTION", "NOISE?")?;
    for r in rows {
        write!(
            out,
            "{:>8.2}% {:>8.2}% {:>+8.2} {:>7.2} {:>9.2}% {:>8.2}% {:>+8.2}",
            r.base_self_pct,
            r.new_self_pct,
            r.delta_self_pct,
            diff.noise_sigma * r.self_standard_error_pct,
            r.base_total_pct,
            r.new_total_pct,
            r.delta_total_pct
        )?;
        if let Some(v) = r.normalised {
            let delta = if v.delta > 0.0 {
                format!("+{}", sig(v.delta))
            } else {
                sig(v.delta)
            };
            write!(
                out,
                " {:>12} {:>12} {:>12} {:>12}",
                sig(v.base),
                sig(v.new),
                delta,
                sig(diff.noise_sigma * v.standard_error)
            )?;
        }
        writeln!(
            out,
            "  {:<6} {}",
            if r.within_noise { "noise" } else { "" },
            r.function
        )?;
    }
    writeln!(
        out,
        "±NOISE: {} binomial standard errors of the change; `noise`: the ranked change is within it",
        diff.noise_sigma
    )?;
    if rows.len() < diff.rows.len() {
        writeln!(
            out,
            "({} more functions; --top 0 shows all)",
            diff.rows.len() - rows.len()
        )?;
    }
    Ok(())
}

/// One row as JSON; the normalised fields are named after the normalisation (`base_per_request`...).
fn json_row(diff: &Diff, r: &Row) -> serde_json::Value {
    let mut v = serde_json::json!({
        "function": r.function,
        "base_self_pct": r.base_self_pct,
        "new_self_pct": r.new_self_pct,
        "delta_self_pct": r.delta_self_pct,
        "noise_self_pct": diff.noise_sigma * r.self_standard_error_pct,
        "base_total_pct": r.base_total_pct,
        "new_total_pct": r.new_total_pct,
        "delta_total_pct": r.delta_total_pct,
        "within_noise": r.within_noise,
    });
    if let (Some(n), Some(suffix)) = (r.normalised, diff.normalisation.suffix()) {
        let map = v.as_object_mut().expect("a JSON object");
        map.insert(format!("base_{suffix}"), n.base.into());
        map.insert(format!("new_{suffix}"), n.new.into());
        map.insert(format!("delta_{suffix}"), n.delta.into());
        map.insert(
            format!("noise_{suffix}"),
            (diff.noise_sigma * n.standard_error).into(),
        );
    }
    v
}

fn side_json(t: &SideTotals) -> serde_json::Value {
    serde_json::json!({
        "value": t.value,
        "samples": t.samples,
        "normalised": t.normalised,
        "duration_seconds": t.duration_seconds,
        "truncated_pct": t.truncated_pct,
        "files": t.files,
    })
}

fn json(diff: &Diff, context: &Context, rows: &[Row], out: &mut impl Write) -> io::Result<()> {
    let doc = serde_json::json!({
        "sample_type": context.sample_type,
        "unit": context.unit,
        "normalisation": diff.normalisation.suffix().unwrap_or("shares"),
        "noise_sigma": diff.noise_sigma,
        "totals": { "base": side_json(&diff.base), "new": side_json(&diff.new) },
        "rows": rows.iter().map(|r| json_row(diff, r)).collect::<Vec<_>>(),
    });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

/// Quotes a CSV field when it holds a comma, quote or line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv(diff: &Diff, rows: &[Row], out: &mut impl Write) -> io::Result<()> {
    let suffix = diff.normalisation.suffix();
    write!(
        out,
        "function,base_self_pct,new_self_pct,delta_self_pct,noise_self_pct,base_total_pct,new_total_pct,delta_total_pct,within_noise"
    )?;
    if let Some(s) = suffix {
        write!(out, ",base_{s},new_{s},delta_{s},noise_{s}")?;
    }
    writeln!(out)?;
    for r in rows {
        write!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            csv_field(&r.function),
            r.base_self_pct,
            r.new_self_pct,
            r.delta_self_pct,
            diff.noise_sigma * r.self_standard_error_pct,
            r.base_total_pct,
            r.new_total_pct,
            r.delta_total_pct,
            r.within_noise
        )?;
        if let Some(n) = r.normalised {
            write!(
                out,
                ",{},{},{},{}",
                n.base,
                n.new,
                n.delta,
                diff.noise_sigma * n.standard_error
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("main"), "main");
        assert_eq!(csv_field("f<a, b>"), "\"f<a, b>\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig(1234.5678), "1235");
        assert_eq!(sig(0.25), "0.2500");
        assert_eq!(sig(0.0), "0");
    }
}
