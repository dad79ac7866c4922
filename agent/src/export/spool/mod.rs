//! The disk spool of remote sinks: a batch the backend cannot take now waits on disk, in
//! `<data-dir>/spool` (OTLP) or `<data-dir>/spool-<sink>`, and is sent later in window order, after the backend recovers or after a restart.
//!
//! - [`format`]: one file per batch (the encoded requests, checksummed);
//! - [`store`]: the directory, its bounds (`--spool-max-mib`, `spool_max_age_secs`) and eviction, oldest
//!   first and counted; damaged files are quarantined;
//! - [`replay`]: sends the oldest spooled batch and settles its file.
//!
//! Delivery is at least once: a batch carries its id (`sonde.batch.id`) on every resource, so a backend
//! can drop a second copy. The export queue ([`crate::export::queue`]) decides when a batch is spooled
//! and interleaves replay with live windows.

pub(crate) mod format;
#[cfg(test)]
mod interleave_tests;
pub(crate) mod replay;
mod store;

pub(crate) use format::SpooledBatch;
pub use store::SpoolLimits;
pub(crate) use store::{Evicted, Spool, SpoolError, batch_id};

/// Default of `--spool-max-mib`.
pub const DEFAULT_SPOOL_MAX_MIB: u64 = 256;
