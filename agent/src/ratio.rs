//! The one rule for a window's shares, so `record`, the daemon's log, `/metrics`, the heartbeat and
//! `sonde status` agree on the same input: a share of good outcomes (named frames, complete stacks,
//! walks reaching a root) is `part / whole`, and 1 when the window had nothing to judge (an idle
//! window missed nothing; 0 would page an operator for a quiet node). A share of defects is one minus
//! the matching good share, so 0 on an empty window.

/// `part / whole` of good outcomes; 1 when `whole` is 0.
pub(crate) fn good_share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

/// `part / whole` of defects; 0 when `whole` is 0.
pub(crate) fn defect_share(part: u64, whole: u64) -> f64 {
    1.0 - good_share(whole.saturating_sub(part), whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_window_is_complete_and_has_no_defects() {
        assert_eq!(good_share(0, 0), 1.0);
        assert_eq!(defect_share(0, 0), 0.0);
        assert_eq!(good_share(3, 4), 0.75);
        assert!((defect_share(1, 4) - 0.25).abs() < 1e-12);
    }
}
