//! Folded stacks (`root;child;leaf count`, one line per stack) and an SVG flame graph rendered by inferno.

use std::{collections::BTreeMap, io::Write};

use super::model::Profile;

/// Folded lines of `profile`, process name first, root to leaf, weighted by value `value_index`.
pub fn folded_lines(profile: &Profile, value_index: usize) -> Vec<String> {
    let mut stacks: BTreeMap<String, i64> = BTreeMap::new();
    for sample in &profile.samples {
        let mut line = sample.comm.replace([';', ' '], "_");
        for frame in sample.frames.iter().rev() {
            line.push(';');
            line.push_str(&frame.display_name().replace([';', ' '], "_"));
        }
        *stacks.entry(line).or_default() += sample.values.get(value_index).copied().unwrap_or(0);
    }
    stacks.into_iter().filter(|(_, v)| *v > 0).map(|(s, v)| format!("{s} {v}")).collect()
}

/// Writes an SVG flame graph of `lines` (folded format) to `out`.
pub fn write_flamegraph(lines: &[String], title: &str, out: impl Write) -> std::io::Result<()> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.count_name = "samples".to_owned();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}
