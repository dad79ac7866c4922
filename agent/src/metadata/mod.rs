//! Workload metadata: which service, version, pod, container and host a process belongs to, as OpenTelemetry
//! semantic-convention tags.
//!
//! Sources: `/proc/PID/cgroup` (container id, pod uid, systemd unit; [`cgroup`]), the Kubernetes API (pods on
//! this node and the node's labels; [`kube`]), the process's executable, and static labels from config.
//! [`MetadataResolver::tags_for`] is called per process per window and caches per pid (bounded, LRU-ish by
//! insertion order); call [`MetadataResolver::forget`] when a process exits.

pub mod cgroup;
pub(crate) mod discovery;
pub mod kube;
pub(crate) mod relabel;
pub mod resolver;
pub mod tags;

pub use resolver::{MetadataConfig, MetadataResolver};
pub use tags::{Tags, keys};

/// `err` and its sources joined with `: ` for a one-line log.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
