//! Integration tests: diff. One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod data_dir_hardening;
mod diff_backends;
mod diff_bad_input;
mod diff_datadir;
mod diff_flamegraph;
mod diff_fold_inlined;
mod diff_hostile_input;
mod diff_label;
mod diff_noise;
mod diff_per_request;
mod diff_seed;
mod diff_truncated;
mod retention_tiers;
