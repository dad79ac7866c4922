//! Sections measured in interleaved rounds of fixed-length runs, every kind once per round.

/// The settings of a section measured in interleaved rounds of fixed-length runs (the Python, Go and
/// short-lived processes sections).
pub(crate) struct Rounds {
    /// The profiled (or timed) span of each run, seconds.
    pub(crate) seconds: u64,
    /// Interleaved rounds over all runs; tables show medians over them.
    pub(crate) rounds: usize,
}

/// Runs `measure(round, kind)` for every kind in every round, the order reversed on odd rounds so no
/// kind is always the first (or last) of a round; returns the runs in the order they were made.
pub(crate) fn interleaved<K: Copy, R, N: std::fmt::Display>(
    section: &str,
    rounds: usize,
    kinds: &[K],
    name: impl Fn(K) -> N,
    mut measure: impl FnMut(usize, K) -> anyhow::Result<R>,
) -> anyhow::Result<Vec<R>> {
    let mut runs = Vec::with_capacity(rounds * kinds.len());
    for round in 0..rounds {
        let mut order = kinds.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        for kind in order {
            eprintln!("{section} bench: round {round}, {}", name(kind));
            runs.push(measure(round, kind)?);
        }
    }
    Ok(runs)
}
