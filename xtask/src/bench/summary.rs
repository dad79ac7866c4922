//! sonde's own report of a run, as the bench sections read it: the JSON summary's figures, and the
//! per-path sample cost from the text summary.

/// The number of summary figure `key` (a `_ratio` in percent), None when absent.
pub(crate) fn summary_number(summary: &[(String, String)], key: &str) -> Option<f64> {
    summary
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| v.trim_end_matches('%').parse::<f64>().ok())
}

/// sonde's summary, from the JSON object `sonde record --summary-json -` prints, in its order: figure
/// name and value (shares, `*_ratio*`, in percent with a `%`; one `name[labels]` entry per series of
/// a figure with labels), then `unsymbolized_top` as text (`binary (reason) samples; ...`).
pub(crate) fn sonde_summary(stdout: &str) -> Vec<(String, String)> {
    let Some(json) = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    else {
        return Vec::new();
    };
    let number = |name: &str, v: &serde_json::Value| {
        let v = v.as_f64().unwrap_or(f64::NAN);
        if name.contains("_ratio") {
            format!("{:.1}%", 100.0 * v)
        } else {
            format!("{v}")
        }
    };
    let mut out = Vec::new();
    for (name, v) in json["figures"].as_object().into_iter().flatten() {
        match v.as_object() {
            Some(series) => out.extend(
                series
                    .iter()
                    .map(|(labels, v)| (format!("{name}[{labels}]"), number(name, v))),
            ),
            None => out.push((name.clone(), number(name, v))),
        }
    }
    // By name: serde_json keeps the file's order or sorts, depending on which features the build
    // unifies, and the tables must not depend on it.
    out.sort();
    let top: Vec<String> = json["unsymbolized_top"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            format!(
                "{} ({}) {}",
                o["binary"].as_str().unwrap_or("?"),
                o["reason"].as_str().unwrap_or("?"),
                o["samples"]
            )
        })
        .collect();
    out.push(("unsymbolized_top".to_owned(), top.join("; ")));
    out
}

/// The median BPF time of one on-CPU sample of `path` as sonde's text summary reports it (its own
/// timing, `oncpu_sample_nanoseconds[PATH/p50]`), ns.
pub(crate) fn sample_cost_p50(summary: &str, path: &str) -> Option<f64> {
    let key = format!("oncpu_sample_nanoseconds[{path}/p50]:");
    summary
        .lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::{sample_cost_p50, sonde_summary};

    #[test]
    fn the_sample_cost_reads_from_the_text_summary() {
        let text = "samples: 3\noncpu_sample_nanoseconds[v8/p50]:   23125\n\
                    oncpu_sample_nanoseconds[tables/p50]:9875\n";
        assert_eq!(sample_cost_p50(text, "v8"), Some(23125.0));
        assert_eq!(sample_cost_p50(text, "tables"), Some(9875.0));
        assert_eq!(sample_cost_p50(text, "java"), None);
    }

    #[test]
    fn the_json_summary_reads_as_names_and_values() {
        let text = "log line\n{\"figures\":{\"offcpu_weight\":672,\"walk_root_ratio\":0.5,\
                    \"input_refusals\":{\"perf_map/owner\":1}},\"unsymbolized_top\":[]}\n";
        assert_eq!(
            sonde_summary(text),
            vec![
                ("input_refusals[perf_map/owner]".to_owned(), "1".to_owned()),
                ("offcpu_weight".to_owned(), "672".to_owned()),
                ("walk_root_ratio".to_owned(), "50.0%".to_owned()),
                ("unsymbolized_top".to_owned(), String::new()),
            ]
        );
    }
}
