//! The differential flame graph: the new profile's stacks, each leaf frame coloured by how much that stack
//! changed against the base (red grew, blue shrank, white unchanged), rendered by inferno.
//!
//! Every stack becomes a line `root;...;leaf BASE NEW` (inferno's differential folded format) where BASE
//! is the base value rescaled into the new profile's scale with the diff's normalisation, so a stack whose
//! normalised value did not move is drawn white even when the captures differ in length or load.

use std::io::{self, Write};

use super::{
    error::DiffError,
    load::{FnId, Loaded},
};

/// The folded differential lines, sorted as inferno requires; an error when they would take more than
/// `max_bytes`. A line repeats every name of its stack, so deep stacks of long names (each bounded on
/// its own when loaded) multiply: this bounds the product.
pub fn differential_lines(
    loaded: &Loaded,
    factors: (f64, f64),
    max_bytes: u64,
) -> Result<Vec<String>, DiffError> {
    let names: Vec<String> = (0..loaded.names.len())
        .map(|i| loaded.names.name(i as FnId).replace(';', ":"))
        .collect();
    let scale = factors.0 / factors.1;
    let line = |stack: &[FnId], base: i64, new: i64| {
        let mut s = String::with_capacity(stack.len() * 24 + 24);
        for (i, &f) in stack.iter().rev().enumerate() {
            if i > 0 {
                s.push(';');
            }
            s.push_str(&names[f as usize]);
        }
        let base = (base as f64 * scale).round() as i64;
        s.push_str(&format!(" {base} {new}"));
        s
    };
    let (base, new) = (&loaded.base.stacks, &loaded.new.stacks);
    // Stacks gone from the new profile have no width to draw; they are in the table instead.
    let drawn = || new.iter().filter(|(_, w)| w.value > 0);
    let bytes: u64 = drawn()
        .map(|(stack, _)| {
            stack
                .iter()
                .map(|&f| names[f as usize].len() as u64 + 1)
                .sum::<u64>()
                + 48
        })
        .sum();
    if bytes > max_bytes {
        return Err(DiffError::FlameGraphTooLarge {
            mib: bytes >> 20,
            limit_mib: max_bytes >> 20,
        });
    }
    let mut lines: Vec<String> = drawn()
        .map(|(stack, w)| line(stack, base.get(stack).map_or(0, |b| b.value), w.value))
        .collect();
    lines.sort_unstable();
    Ok(lines)
}

/// Renders `lines` as an SVG differential flame graph.
pub fn write_svg(
    lines: &[String],
    title: &str,
    count_name: &str,
    out: impl Write,
) -> io::Result<()> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.subtitle =
        Some("width: new profile; colour: change against base (red grew, blue shrank)".to_owned());
    options.count_name = count_name.to_owned();
    options.no_sort = true;
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::load::{Interner, Side, Weight};

    #[test]
    fn folded_lines_are_bounded() {
        let mut names = Interner::default();
        let long = names.intern(&"x".repeat(1000));
        let mut new = Side::default();
        let weight = Weight {
            value: 1,
            count: 1.0,
        };
        new.stacks.insert(vec![long; 100].into(), weight);
        let loaded = Loaded {
            names,
            base: Side::default(),
            new,
            sample_type: "cpu/nanoseconds".into(),
            unit: "nanoseconds".into(),
        };
        // One line of 100 names of 1000 bytes: about 100 KB.
        assert_eq!(
            differential_lines(&loaded, (1.0, 1.0), 1 << 20)
                .unwrap()
                .len(),
            1
        );
        assert!(matches!(
            differential_lines(&loaded, (1.0, 1.0), 50_000),
            Err(DiffError::FlameGraphTooLarge { .. })
        ));
    }
}
