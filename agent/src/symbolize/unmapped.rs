//! `[unmapped]` frames: user addresses that no file sonde knows holds, and why, so an operator can tell
//! a process that was gone too soon from a mapping sonde missed.

use std::borrow::Cow;

use super::debuginfo::Reason;

/// Pseudo path of frames outside any mapping the process had when it was captured.
pub(super) const UNMAPPED: &str = "[unmapped]";

/// `[unmapped]` frames (weighted by sample count), by reason (see [`Reason`]'s last three).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UnmappedFrames {
    /// The process exited before its mappings were read.
    pub process_gone: u64,
    /// The address is in none of the process's known mappings.
    pub outside_mappings: u64,
    /// A file-relative frame of a file no longer known.
    pub unknown_file: u64,
}

impl UnmappedFrames {
    /// Counts the `[unmapped]` frames among `unnamed`, each `weight` times.
    pub(super) fn add(&mut self, unnamed: &[(Cow<'_, str>, Reason)], weight: u64) {
        for (path, reason) in unnamed {
            if path != UNMAPPED {
                continue;
            }
            match reason {
                Reason::ProcessGone => self.process_gone += weight,
                Reason::OutsideMappings => self.outside_mappings += weight,
                Reason::UnknownFile => self.unknown_file += weight,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unmapped_frames_count_each_by_its_reason_and_weight() {
        let unnamed: Vec<(Cow<'_, str>, Reason)> = vec![
            (UNMAPPED.into(), Reason::ProcessGone),
            (UNMAPPED.into(), Reason::ProcessGone),
            (UNMAPPED.into(), Reason::OutsideMappings),
            (UNMAPPED.into(), Reason::UnknownFile),
            ("/usr/bin/cc1".into(), Reason::NoDebugFile),
            ("[jit]".into(), Reason::NoPerfMap),
        ];
        let mut counts = UnmappedFrames::default();
        counts.add(&unnamed, 3);
        assert_eq!(
            counts,
            UnmappedFrames {
                process_gone: 6,
                outside_mappings: 3,
                unknown_file: 3,
            }
        );
        assert_eq!(Reason::ProcessGone.as_str(), "process gone");
    }
}
