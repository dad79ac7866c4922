//! Folded stacks (`root;child;leaf count`, one line per stack) and an SVG flame graph rendered by inferno.

use std::{collections::BTreeMap, io::Write};

use super::model::Profile;

/// Folded lines of `profile`, process name first, root to leaf, weighted by value `value_index`.
pub fn folded_lines(profile: &Profile, value_index: usize) -> Vec<String> {
    let mut stacks: BTreeMap<String, i64> = BTreeMap::new();
    for sample in &profile.samples {
        let mut line = sample.comm.replace([';', ' '], "_");
        for frame in sample.frames.iter().rev() {
            // A frame's inline chain is innermost first: inlined functions (a C++ helper, a Java
            // method the JIT inlined) become frames of their own above the function they are in,
            // as in the pprof and in perf's folded output.
            if frame.symbols.is_empty() {
                push_frame(&mut line, &frame.display_name());
            }
            for symbol in frame.symbols.iter().rev() {
                push_frame(&mut line, &symbol.name);
            }
        }
        *stacks.entry(line).or_default() += sample.values.get(value_index).copied().unwrap_or(0);
    }
    stacks
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(s, v)| format!("{s} {v}"))
        .collect()
}

fn push_frame(line: &mut String, name: &str) {
    line.push(';');
    line.push_str(&name.replace([';', ' '], "_"));
}

/// Writes an SVG flame graph of `lines` (folded format) to `out`.
pub fn write_flamegraph(lines: &[String], title: &str, out: impl Write) -> std::io::Result<()> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.count_name = "samples".to_owned();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::profile::{Frame, FrameKind, ProfileKind, StackSample, Symbol};

    fn frame(chain: &[&str]) -> Frame {
        Frame {
            address: 0x1000,
            kind: FrameKind::User,
            return_address: false,
            module: None,
            symbols: Arc::from(
                chain
                    .iter()
                    .map(|n| Symbol {
                        name: (*n).to_owned(),
                        file: None,
                        line: None,
                    })
                    .collect::<Vec<_>>(),
            ),
        }
    }

    #[test]
    fn inlined_functions_are_frames_of_their_own_root_first() {
        let profile = Profile {
            kind: ProfileKind::Cpu,
            time_nanos: 0,
            duration_nanos: 1,
            period: 1,
            // Leaf first; the leaf's chain is innermost first (`step` inlined into `burnA`).
            samples: vec![StackSample {
                pid: 1,
                tid: 1,
                comm: "java".into(),
                frames: vec![
                    frame(&["Split.step", "Split.burnA"]),
                    frame(&["Split.main"]),
                    frame(&[]),
                ],
                values: vec![3],
                truncated: false,
                labels: Default::default(),
            }],
            notes: Vec::new(),
        };
        assert_eq!(
            folded_lines(&profile, 0),
            vec!["java;0x1000;Split.main;Split.burnA;Split.step 3".to_owned()]
        );
    }
}
