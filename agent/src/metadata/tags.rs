//! [`Tags`]: the identity of a workload as OpenTelemetry semantic-convention attributes.

use std::collections::BTreeMap;

/// Attribute names (OpenTelemetry semantic conventions) that sonde sets.
pub mod keys {
    /// The machine's name.
    pub const HOST_NAME: &str = "host.name";
    /// Cloud region, from the node label `topology.kubernetes.io/region` or config.
    pub const CLOUD_REGION: &str = "cloud.region";
    /// Logical service name.
    pub const SERVICE_NAME: &str = "service.name";
    /// Service version.
    pub const SERVICE_VERSION: &str = "service.version";
    /// Kubernetes namespace.
    pub const K8S_NAMESPACE_NAME: &str = "k8s.namespace.name";
    /// Kubernetes pod name.
    pub const K8S_POD_NAME: &str = "k8s.pod.name";
    /// Kubernetes pod uid.
    pub const K8S_POD_UID: &str = "k8s.pod.uid";
    /// Container name inside the pod spec.
    pub const K8S_CONTAINER_NAME: &str = "k8s.container.name";
    /// Kubernetes node name.
    pub const K8S_NODE_NAME: &str = "k8s.node.name";
    /// Container runtime id.
    pub const CONTAINER_ID: &str = "container.id";
    /// Process id.
    pub const PROCESS_PID: &str = "process.pid";
    /// Executable base name.
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    /// The language runtime a process runs on (`go`), where sonde can tell from its executable.
    pub const PROCESS_RUNTIME_NAME: &str = "process.runtime.name";
    /// That runtime's version (`go1.22.1`).
    pub const PROCESS_RUNTIME_VERSION: &str = "process.runtime.version";
    /// The systemd unit a process runs in (off Kubernetes).
    pub const SYSTEMD_UNIT: &str = "systemd.unit";
}

/// Key/value attributes describing one workload, sorted by key (so equal tag sets compare and hash equal).
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Tags(pub BTreeMap<String, String>);

impl Tags {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`, replacing an earlier value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.insert(key.into(), value.into());
    }

    /// Sets `key` only when it has no value yet.
    pub fn insert_default(&mut self, key: &str, value: impl Into<String>) {
        self.0.entry(key.to_owned()).or_insert_with(|| value.into());
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// All pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Tags {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}
