//! `TARGETS`: the relabel rules' decision per process, as the kernel programs read it before any
//! other work of a sample (`agent-ebpf/src/targets.rs`). Only decisions that differ from "kept at
//! the base frequency" have an entry, so a host whose rules keep everything fills nothing.

use aya::maps::{HashMap, MapData};
use sonde_abi::{TARGET_KEEP_ALL, TargetRule, names};

use super::{BpfError, maps::map_err};

/// The kernel's view of the targets.
pub(crate) struct TargetMap(HashMap<MapData, u32, TargetRule>);

impl TargetMap {
    pub(super) fn new(map: HashMap<MapData, u32, TargetRule>) -> Self {
        Self(map)
    }

    /// Records that `tgid` is dropped (`hz` None) or sampled at `hz` of a base of `base_hz`.
    pub(crate) fn set(&mut self, tgid: u32, hz: Option<u64>, base_hz: u64) -> Result<(), BpfError> {
        let keep = keep_share(hz, base_hz);
        if keep >= TARGET_KEEP_ALL {
            return self.remove(tgid);
        }
        self.0
            .insert(tgid, TargetRule { keep }, 0)
            .map_err(map_err(names::TARGETS))
    }

    /// Forgets `tgid` (exited, or back to the base frequency).
    pub(crate) fn remove(&mut self, tgid: u32) -> Result<(), BpfError> {
        match self.0.remove(&tgid) {
            Ok(()) => Ok(()),
            Err(source) if super::maps::key_absent(&source) => Ok(()),
            Err(source) => Err(map_err(names::TARGETS)(source)),
        }
    }
}

/// `TargetRule::keep` for a target dropped (`None`) or sampled at `hz` of `base_hz`: its share of
/// the base rate's samples in 1/65536, at least 1 for a kept target (never dropped by rounding).
pub(crate) fn keep_share(hz: Option<u64>, base_hz: u64) -> u32 {
    match hz {
        None => 0,
        Some(hz) if hz >= base_hz => TARGET_KEEP_ALL,
        Some(hz) => ((hz * u64::from(TARGET_KEEP_ALL)) / base_hz.max(1)).max(1) as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        assert_eq!(keep_share(None, 99), 0);
        assert_eq!(keep_share(Some(99), 99), TARGET_KEEP_ALL);
        assert_eq!(keep_share(Some(500), 99), TARGET_KEEP_ALL);
        assert_eq!(keep_share(Some(19), 99), 19 * 65536 / 99);
        assert_eq!(keep_share(Some(1), 1000), 65);
    }
}
