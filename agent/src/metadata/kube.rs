//! Pod and node metadata from the Kubernetes API: a watch of the pods on this node (field selector
//! `spec.nodeName=<node>`) kept in a local cache keyed by pod uid, and the node's labels.
//!
//! Needs RBAC `get` on `nodes` and `list`/`watch` on `pods`. Works with the in-cluster service account or a
//! kubeconfig (whatever `kube::Config::infer` finds). A lost watch is re-established by the watcher with
//! backoff; the cache keeps serving the last known state meanwhile.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, RwLock},
};

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client,
    runtime::{WatchStreamExt as _, watcher},
};

/// Errors reaching the Kubernetes API.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No usable client configuration.
    #[error(
        "no Kubernetes client configuration (in-cluster service account or kubeconfig); unset NODE_NAME to run without Kubernetes metadata"
    )]
    Config {
        /// What kube reported.
        #[source]
        source: kube::config::InferConfigError,
    },
    /// The client could not be built.
    #[error("building the Kubernetes client failed; check the kubeconfig's TLS settings")]
    Client {
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
    /// The node object could not be read.
    #[error("reading node {node} from the Kubernetes API failed; check RBAC allows `get` on nodes")]
    Node {
        /// The node name.
        node: String,
        /// What kube reported.
        #[source]
        source: kube::Error,
    },
}

/// One container of a pod, from its status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Name in the pod spec.
    pub name: String,
    /// Runtime id without the `containerd://` style prefix.
    pub container_id: Option<String>,
    /// Image reference as reported (`registry/repo:tag` or with a digest).
    pub image: String,
}

/// What sonde keeps of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
    /// Pod annotations (discovery labels for relabel rules).
    pub annotations: BTreeMap<String, String>,
    /// Containers (regular, init and ephemeral) with their runtime ids.
    pub containers: Vec<ContainerInfo>,
}

impl PodInfo {
    /// Extracts the fields sonde needs; `None` for a pod without uid.
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let meta = &pod.metadata;
        let uid = meta.uid.clone()?;
        let mut containers = Vec::new();
        if let Some(status) = &pod.status {
            let lists = [
                &status.container_statuses,
                &status.init_container_statuses,
                &status.ephemeral_container_statuses,
            ];
            for list in lists.into_iter().flatten() {
                for c in list {
                    containers.push(ContainerInfo {
                        name: c.name.clone(),
                        container_id: c.container_id.as_deref().map(strip_runtime_prefix),
                        image: c.image.clone(),
                    });
                }
            }
        }
        // Before statuses exist, the spec still names the containers and images.
        if containers.is_empty()
            && let Some(spec) = &pod.spec
        {
            containers = spec
                .containers
                .iter()
                .map(|c| ContainerInfo {
                    name: c.name.clone(),
                    container_id: None,
                    image: c.image.clone().unwrap_or_default(),
                })
                .collect();
        }
        Some(Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid,
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            containers,
        })
    }

    /// The container with runtime id `id`, else the only container of a single-container pod.
    pub fn container(&self, id: Option<&str>) -> Option<&ContainerInfo> {
        if let Some(id) = id
            && let Some(c) = self
                .containers
                .iter()
                .find(|c| c.container_id.as_deref() == Some(id))
        {
            return Some(c);
        }
        match self.containers.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }
}

/// `containerd://abc` -> `abc` (also `cri-o://`, `docker://`).
fn strip_runtime_prefix(id: &str) -> String {
    id.split_once("://").map_or(id, |(_, rest)| rest).to_owned()
}

/// The tag of an image reference: `repo/app:1.2.3` -> `1.2.3`; none for digests-only or untagged images.
pub fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (_, tag) = last.split_once(':')?;
    (!tag.is_empty()).then_some(tag)
}

/// The shared cache the watch fills and the resolver reads.
#[derive(Clone, Debug, Default)]
pub struct KubeCache {
    pods: Arc<RwLock<HashMap<String, PodInfo>>>,
    node_labels: Arc<RwLock<BTreeMap<String, String>>>,
}

impl KubeCache {
    /// The pod with `uid`, if the watch has seen it.
    pub fn pod(&self, uid: &str) -> Option<PodInfo> {
        self.pods
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
    }

    /// A label of this node.
    pub fn node_label(&self, key: &str) -> Option<String> {
        self.node_labels
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Number of cached pods.
    pub fn pod_count(&self) -> usize {
        self.pods.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Adds or replaces a pod.
    pub fn apply(&self, pod: &Pod) {
        if let Some(info) = PodInfo::from_pod(pod) {
            self.pods
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(info.uid.clone(), info);
        }
    }

    /// Removes a pod.
    pub fn delete(&self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            self.pods
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(uid);
        }
    }

    /// Replaces the whole pod set (after a relist).
    pub fn replace(&self, pods: HashMap<String, PodInfo>) {
        *self.pods.write().unwrap_or_else(|e| e.into_inner()) = pods;
    }

    /// Replaces the node labels.
    pub fn set_node_labels(&self, labels: BTreeMap<String, String>) {
        *self.node_labels.write().unwrap_or_else(|e| e.into_inner()) = labels;
    }
}

/// A client from the in-cluster service account or the kubeconfig.
pub async fn infer_client() -> Result<Client, KubeError> {
    let config = kube::Config::infer()
        .await
        .map_err(|source| KubeError::Config { source })?;
    Client::try_from(config).map_err(|source| KubeError::Client { source })
}

/// Reads the node's labels into `cache` (a failure is logged, not fatal), then spawns the pod watch that keeps
/// `cache` current. Returns the watch task; dropping the runtime ends it.
pub async fn start(
    client: Client,
    node_name: &str,
    cache: KubeCache,
) -> Result<tokio::task::JoinHandle<()>, KubeError> {
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.get(node_name).await {
        Ok(node) => cache.set_node_labels(node.metadata.labels.unwrap_or_default()),
        // Pod metadata is worth more than the region: go on without the node's labels.
        Err(source) => {
            let err = KubeError::Node {
                node: node_name.to_owned(),
                source,
            };
            tracing::warn!(error = %crate::metadata::error_chain(&err), "no node labels (cloud.region from config only)");
        }
    }

    let pods: Api<Pod> = Api::all(client);
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let node_name = node_name.to_owned();
    Ok(tokio::spawn(async move {
        let mut relist: HashMap<String, PodInfo> = HashMap::new();
        let mut stream = watcher(pods, config).default_backoff().boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Init) => relist.clear(),
                Ok(watcher::Event::InitApply(pod)) => {
                    if let Some(info) = PodInfo::from_pod(&pod) {
                        relist.insert(info.uid.clone(), info);
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    cache.replace(std::mem::take(&mut relist));
                    tracing::debug!(node = %node_name, pods = cache.pod_count(), "pod cache synced");
                }
                Ok(watcher::Event::Apply(pod)) => cache.apply(&pod),
                Ok(watcher::Event::Delete(pod)) => cache.delete(&pod),
                Err(err) => tracing::warn!(error = %err, "pod watch failed; retrying with backoff"),
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags() {
        assert_eq!(
            image_tag("registry.example.com:5000/shop/cart:1.4.2"),
            Some("1.4.2")
        );
        assert_eq!(image_tag("nginx:1.27"), Some("1.27"));
        assert_eq!(image_tag("nginx"), None);
        assert_eq!(image_tag("registry.example.com:5000/shop/cart"), None);
        assert_eq!(image_tag("repo/app@sha256:abcd"), None);
        assert_eq!(image_tag("repo/app:2.0@sha256:abcd"), Some("2.0"));
    }

    #[test]
    fn runtime_prefix() {
        assert_eq!(strip_runtime_prefix("containerd://abc"), "abc");
        assert_eq!(strip_runtime_prefix("cri-o://abc"), "abc");
        assert_eq!(strip_runtime_prefix("abc"), "abc");
    }
}
