//! Integration tests: export. One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod export_backends;
mod export_invalid_argument;
mod export_local_dir;
mod export_local_disk_full;
mod export_otlp_roundtrip;
mod export_partial_success;
mod export_pyroscope_outage;
mod export_python_peer;
mod export_queue_overflow;
mod export_receiver_late;
mod export_retry_unavailable;
mod export_spool_bound;
mod export_spool_hanging;
mod export_spool_restart;
mod export_tls;
mod export_tls_connect;
mod run_local_dir;
mod run_otlp_e2e;
