//! The two text formats of `/metrics`. prometheus-client writes OpenMetrics; Prometheus' classic text
//! format (0.0.4, what a scraper gets without asking for OpenMetrics) differs in three ways, undone
//! here: a counter's HELP/TYPE name carries the `_total` of its samples, there are no `# UNIT` lines,
//! and there is no `# EOF`.

use std::collections::HashSet;

/// Content type of OpenMetrics text.
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the classic Prometheus text format.
pub(crate) const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Rewrites OpenMetrics text as Prometheus text format 0.0.4.
pub(crate) fn to_prometheus(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(rewritten.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_get_total_and_openmetrics_only_lines_go() {
        let om = "# HELP a_seconds CPU.\n# TYPE a_seconds counter\n# UNIT a_seconds seconds\n\
                  a_seconds_total 1.5\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            to_prometheus(om),
            "# HELP a_seconds_total CPU.\n# TYPE a_seconds_total counter\na_seconds_total 1.5\n\
             # HELP g A gauge.\n# TYPE g gauge\ng 2\n"
        );
    }
}
