//! [`MetadataResolver`]: the tags of a process, from `/proc/PID/{cgroup,exe,stat}` (through `procfs`),
//! the Kubernetes pod cache, the node's labels and static labels; cached per pid in a bounded map.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    sync::{Arc, Mutex},
};

use super::{
    cgroup,
    kube::{self, KubeCache},
    tags::{Tags, keys},
};

/// Node label carrying the cloud region.
pub const REGION_NODE_LABEL: &str = "topology.kubernetes.io/region";

/// Settings of the resolver (merged from config file, flags and environment by `config`).
#[derive(Clone, Debug)]
pub struct MetadataConfig {
    /// `host.name`; the node name, else the kernel's hostname, when unset.
    pub host_name: Option<String>,
    /// `cloud.region` when the node has no `topology.kubernetes.io/region` label.
    pub region: Option<String>,
    /// This node's name (`NODE_NAME` from the downward API); Kubernetes metadata is off without it.
    pub node_name: Option<String>,
    /// Pod label holding `service.name`.
    pub service_name_label: String,
    /// Pod label holding `service.version`.
    pub service_version_label: String,
    /// Labels added to every process; they win over derived values.
    pub static_labels: BTreeMap<String, String>,
    /// Where `/proc` is (a host mount in a container, a fixture in tests).
    pub proc_root: PathBuf,
    /// Most pids kept in the cache.
    pub cache_capacity: usize,
}

impl Default for MetadataConfig {
    fn default() -> Self {
        Self {
            host_name: None,
            region: None,
            node_name: None,
            service_name_label: "app.kubernetes.io/name".to_owned(),
            service_version_label: "app.kubernetes.io/version".to_owned(),
            static_labels: BTreeMap::new(),
            proc_root: PathBuf::from("/proc"),
            cache_capacity: 16_384,
        }
    }
}

#[derive(Default)]
struct PidCache {
    entries: HashMap<u32, (u64, Arc<Tags>)>,
    order: BTreeMap<u64, u32>,
    next: u64,
}

/// Resolves and caches the tags of processes. Cheap per call once a pid is cached.
pub struct MetadataResolver {
    config: MetadataConfig,
    kube: Option<KubeCache>,
    host_name: String,
    cache: Mutex<PidCache>,
}

impl MetadataResolver {
    /// A resolver reading `config.proc_root` and, when given, a Kubernetes cache.
    pub fn new(config: MetadataConfig, kube: Option<KubeCache>) -> Self {
        let host_name = config
            .host_name
            .clone()
            .or_else(|| config.node_name.clone())
            .or_else(|| {
                std::fs::read_to_string(config.proc_root.join("sys/kernel/hostname"))
                    .ok()
                    .map(|s| s.trim().to_owned())
            })
            .unwrap_or_default();
        Self {
            config,
            kube,
            host_name,
            cache: Mutex::new(PidCache::default()),
        }
    }

    /// Starts the Kubernetes pod watch when `config.node_name` is set, then builds the resolver. Without a node
    /// name, or when the API cannot be reached, it runs without Kubernetes metadata (logged once).
    pub async fn start(config: MetadataConfig) -> Self {
        let Some(node) = config.node_name.clone() else {
            tracing::debug!("NODE_NAME not set: no Kubernetes metadata");
            return Self::new(config, None);
        };
        let cache = KubeCache::default();
        let started = match kube::infer_client().await {
            Ok(client) => kube::start(client, &node, cache.clone())
                .await
                .map(|_task| ()),
            Err(err) => Err(err),
        };
        match started {
            Ok(()) => Self::new(config, Some(cache)),
            Err(err) => {
                tracing::warn!(error = %crate::metadata::error_chain(&err), "running without Kubernetes metadata");
                Self::new(config, None)
            }
        }
    }

    /// The tags of `pid`, cached until [`forget`](Self::forget) or eviction. Shared: every window's
    /// profile of the process holds the same tags, and copying them (a dozen strings in a tree) per
    /// profile per window was ~5% of the agent's CPU with 1,000 services.
    pub fn tags_for(&self, pid: u32) -> Arc<Tags> {
        if let Some((_, tags)) = self.lock().entries.get(&pid) {
            return tags.clone();
        }
        let (tags, complete) = self.resolve(pid);
        let tags = Arc::new(tags);
        if complete {
            self.remember(pid, tags.clone());
        }
        tags
    }

    /// The discovery labels of `pid` for relabel rules, and whether they are final (false while
    /// its pod is not in the cache yet). Not cached: the targets keep them.
    pub(crate) fn discovery(
        &self,
        pid: u32,
        runtime: Option<&str>,
    ) -> (super::relabel::Labels, bool) {
        let sources = super::discovery::Sources {
            proc_root: &self.config.proc_root,
            kube: self.kube.as_ref(),
            node_name: self.config.node_name.as_deref(),
        };
        super::discovery::labels(&sources, pid, runtime)
    }

    /// This host's `host.name`.
    pub fn host_name(&self) -> &str {
        &self.host_name
    }

    /// Drops the cached tags of an exited process.
    pub fn forget(&self, pid: u32) {
        let mut cache = self.lock();
        if let Some((seq, _)) = cache.entries.remove(&pid) {
            cache.order.remove(&seq);
        }
    }

    /// Number of cached pids.
    pub fn cached(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PidCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remember(&self, pid: u32, tags: Arc<Tags>) {
        let capacity = self.config.cache_capacity.max(1);
        let mut cache = self.lock();
        while cache.entries.len() >= capacity {
            let Some((_, oldest)) = cache.order.pop_first() else {
                break;
            };
            cache.entries.remove(&oldest);
        }
        let seq = cache.next;
        cache.next += 1;
        cache.order.insert(seq, pid);
        cache.entries.insert(pid, (seq, tags));
    }

    /// The tags and whether they are final (false while a pod named by the cgroup is not in the cache yet,
    /// so a later call retries).
    fn resolve(&self, pid: u32) -> (Tags, bool) {
        let process =
            procfs::process::Process::new_with_root(self.config.proc_root.join(pid.to_string()));
        let cgroup = process
            .as_ref()
            .ok()
            .and_then(|p| p.cgroups().ok())
            .map(|groups| {
                cgroup::from_lines(groups.0.iter().map(|g| (g.hierarchy, g.pathname.as_str())))
            })
            .unwrap_or_default();
        let exe = process
            .as_ref()
            .ok()
            .and_then(|p| {
                p.exe()
                    .ok()
                    .and_then(|path| {
                        path.file_name().map(|n| {
                            n.to_string_lossy()
                                .trim_end_matches(" (deleted)")
                                .to_owned()
                        })
                    })
                    .or_else(|| p.stat().ok().map(|s| s.comm))
            })
            .filter(|s| !s.is_empty());

        let mut tags = Tags::new();
        let mut complete = true;
        if !self.host_name.is_empty() {
            tags.insert(keys::HOST_NAME, self.host_name.clone());
        }
        tags.insert(keys::PROCESS_PID, pid.to_string());
        if let Some(exe) = &exe {
            tags.insert(keys::PROCESS_EXECUTABLE_NAME, exe.clone());
        }
        if let Some(node) = &self.config.node_name {
            tags.insert(keys::K8S_NODE_NAME, node.clone());
        }
        let region = self
            .kube
            .as_ref()
            .and_then(|k| k.node_label(REGION_NODE_LABEL))
            .or_else(|| self.config.region.clone());
        if let Some(region) = region {
            tags.insert(keys::CLOUD_REGION, region);
        }
        if let Some(id) = &cgroup.container_id {
            tags.insert(keys::CONTAINER_ID, id.clone());
        }
        if let (Some(uid), Some(kube)) = (&cgroup.pod_uid, &self.kube) {
            tags.insert(keys::K8S_POD_UID, uid.clone());
            match kube.pod(uid) {
                Some(pod) => self.pod_tags(&pod, cgroup.container_id.as_deref(), &mut tags),
                None => complete = false,
            }
        } else if let Some(uid) = &cgroup.pod_uid {
            tags.insert(keys::K8S_POD_UID, uid.clone());
        }
        // What a tracer in the process says of it (its OpenTelemetry process context:
        // `service.name`, `service.instance.id`, ...) names it before its unit or executable do.
        for (key, value) in crate::runtimes::registry::published_resource(pid) {
            tags.insert_default(&key, value);
        }
        if let Some(unit) = &cgroup.systemd_unit {
            tags.insert(keys::SYSTEMD_UNIT, unit.clone());
            tags.insert_default(keys::SERVICE_NAME, unit.trim_end_matches(".service"));
        }
        let exe_path = self.config.proc_root.join(pid.to_string()).join("exe");
        if let Some(identity) = crate::runtimes::registry::identify(&exe_path) {
            // A binary that says what it is (Go's build info): its main module names the service
            // when nothing above did.
            tags.insert(keys::PROCESS_RUNTIME_NAME, identity.runtime);
            tags.insert(keys::PROCESS_RUNTIME_VERSION, identity.runtime_version);
            if let Some(service) = identity.service {
                tags.insert_default(keys::SERVICE_NAME, service);
            }
            if let Some(version) = identity.service_version {
                tags.insert_default(keys::SERVICE_VERSION, version);
            }
        }
        if let Some(exe) = exe {
            tags.insert_default(keys::SERVICE_NAME, exe);
        }
        for (k, v) in &self.config.static_labels {
            tags.insert(k.clone(), v.clone());
        }
        (tags, complete)
    }

    fn pod_tags(&self, pod: &kube::PodInfo, container_id: Option<&str>, tags: &mut Tags) {
        tags.insert(keys::K8S_NAMESPACE_NAME, pod.namespace.clone());
        tags.insert(keys::K8S_POD_NAME, pod.name.clone());
        let container = pod.container(container_id);
        if let Some(c) = container {
            tags.insert(keys::K8S_CONTAINER_NAME, c.name.clone());
        }
        if let Some(name) = pod.labels.get(&self.config.service_name_label) {
            tags.insert(keys::SERVICE_NAME, name.clone());
        } else if let Some(c) = container {
            // No name label: the container name is the closest thing to a service identity in a pod.
            tags.insert(keys::SERVICE_NAME, c.name.clone());
        }
        let version = pod
            .labels
            .get(&self.config.service_version_label)
            .cloned()
            .or_else(|| {
                container
                    .and_then(|c| kube::image_tag(&c.image))
                    .map(str::to_owned)
            });
        if let Some(version) = version {
            tags.insert(keys::SERVICE_VERSION, version);
        }
    }
}
