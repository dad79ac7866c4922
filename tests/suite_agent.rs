//! Integration tests: agent. One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod config_invalid_key;
mod config_ranges;
mod daemon_thread_death;
mod deploy_image;
mod deploy_manifests;
mod deploy_package;
mod deploy_systemd;
mod hostile_processes;
mod least_privilege;
mod metadata_kubernetes;
mod metadata_offcluster;
mod metrics_endpoint;
mod relabel_targets;
