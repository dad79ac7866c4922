//! Discovery labels: what sonde knows of a process, under the names relabel rules read
//! (`__meta_process_*`, `__meta_container_id`, `__meta_systemd_unit`, `__meta_kubernetes_*`),
//! the names Parca Agent and Alloy use where they have one. Computed once per process (at its
//! first sample and after each exec), and again while its pod is not in the cache yet or when the
//! pod's labels change.

use std::path::Path;

use super::{
    cgroup,
    kube::{KubeCache, PodInfo},
    relabel::Labels,
};

/// Label names.
pub(crate) mod names {
    pub(crate) const PID: &str = "__meta_process_pid";
    pub(crate) const COMM: &str = "__meta_process_comm";
    pub(crate) const EXE: &str = "__meta_process_exe";
    pub(crate) const CGROUP: &str = "__meta_process_cgroup";
    pub(crate) const UID: &str = "__meta_process_uid";
    pub(crate) const RUNTIME: &str = "__meta_process_runtime";
    pub(crate) const CONTAINER_ID: &str = "__meta_container_id";
    pub(crate) const SYSTEMD_UNIT: &str = "__meta_systemd_unit";
    pub(crate) const NAMESPACE: &str = "__meta_kubernetes_namespace";
    pub(crate) const POD_NAME: &str = "__meta_kubernetes_pod_name";
    pub(crate) const POD_LABEL: &str = "__meta_kubernetes_pod_label_";
    pub(crate) const POD_LABEL_PRESENT: &str = "__meta_kubernetes_pod_labelpresent_";
    pub(crate) const POD_ANNOTATION: &str = "__meta_kubernetes_pod_annotation_";
    pub(crate) const POD_ANNOTATION_PRESENT: &str = "__meta_kubernetes_pod_annotationpresent_";
    pub(crate) const CONTAINER_NAME: &str = "__meta_kubernetes_pod_container_name";
    pub(crate) const NODE_NAME: &str = "__meta_kubernetes_node_name";
}

/// What discovery needs besides the pid.
pub(crate) struct Sources<'a> {
    pub(crate) proc_root: &'a Path,
    pub(crate) kube: Option<&'a KubeCache>,
    pub(crate) node_name: Option<&'a str>,
}

/// The discovery labels of `pid` (`runtime`: the runtime sonde found in it, if any), and whether
/// they are final: false while the pod its cgroup names is not in the pod cache yet.
pub(crate) fn labels(sources: &Sources<'_>, pid: u32, runtime: Option<&str>) -> (Labels, bool) {
    let mut out = Labels::new();
    let mut put = |name: &str, value: String| {
        if !value.is_empty() {
            out.insert(name.to_owned(), value);
        }
    };
    put(names::PID, pid.to_string());
    let dir = sources.proc_root.join(pid.to_string());
    let process = procfs::process::Process::new_with_root(dir);
    let process = process.as_ref().ok();
    if let Some(stat) = process.and_then(|p| p.stat().ok()) {
        put(names::COMM, stat.comm);
    }
    if let Some(exe) = process.and_then(|p| p.exe().ok()) {
        let exe = exe.to_string_lossy();
        put(names::EXE, exe.trim_end_matches(" (deleted)").to_owned());
    }
    if let Some(uid) = process.and_then(|p| p.uid().ok()) {
        put(names::UID, uid.to_string());
    }
    if let Some(runtime) = runtime {
        put(names::RUNTIME, runtime.to_owned());
    }
    let groups = process.and_then(|p| p.cgroups().ok());
    let lines: Vec<(u32, String)> = groups
        .map(|g| g.0.into_iter().map(|c| (c.hierarchy, c.pathname)).collect())
        .unwrap_or_default();
    // The unified hierarchy's path (v2, or the hybrid layout's `0::` line), else the first v1 one.
    if let Some((_, path)) = lines
        .iter()
        .find(|(h, _)| *h == 0)
        .or_else(|| lines.first())
    {
        put(names::CGROUP, path.clone());
    }
    let cgroup = cgroup::from_lines(lines.iter().map(|(h, p)| (*h, p.as_str())));
    if let Some(id) = &cgroup.container_id {
        put(names::CONTAINER_ID, id.clone());
    }
    if let Some(unit) = &cgroup.systemd_unit {
        put(names::SYSTEMD_UNIT, unit.clone());
    }
    let mut complete = true;
    if let Some(node) = sources.node_name {
        put(names::NODE_NAME, node.to_owned());
    }
    if let (Some(uid), Some(kube)) = (&cgroup.pod_uid, sources.kube) {
        match kube.pod(uid) {
            Some(pod) => pod_labels(&pod, cgroup.container_id.as_deref(), &mut out),
            None => complete = false,
        }
    }
    (out, complete)
}

fn pod_labels(pod: &PodInfo, container_id: Option<&str>, out: &mut Labels) {
    out.insert(names::NAMESPACE.into(), pod.namespace.clone());
    out.insert(names::POD_NAME.into(), pod.name.clone());
    if let Some(c) = pod.container(container_id) {
        out.insert(names::CONTAINER_NAME.into(), c.name.clone());
    }
    let sets = [
        (&pod.labels, names::POD_LABEL, names::POD_LABEL_PRESENT),
        (
            &pod.annotations,
            names::POD_ANNOTATION,
            names::POD_ANNOTATION_PRESENT,
        ),
    ];
    for (map, prefix, present) in sets {
        for (k, v) in map {
            let name = sanitize(k);
            out.insert(format!("{present}{name}"), "true".into());
            if !v.is_empty() {
                out.insert(format!("{prefix}{name}"), v.clone());
            }
        }
    }
}

/// A Kubernetes label name as a label name: every character outside `[a-zA-Z0-9_]` becomes `_`
/// (`app.kubernetes.io/name` → `app_kubernetes_io_name`), as Prometheus's discovery does.
pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_its_labels() {
        let pid = std::process::id();
        let sources = Sources {
            proc_root: Path::new("/proc"),
            kube: None,
            node_name: Some("node-1"),
        };
        let (labels, complete) = labels(&sources, pid, Some("go"));
        assert!(complete);
        assert_eq!(labels[names::PID], pid.to_string());
        assert_eq!(labels[names::RUNTIME], "go");
        assert_eq!(labels[names::NODE_NAME], "node-1");
        assert!(labels[names::EXE].starts_with('/'), "{labels:?}");
        assert!(labels[names::CGROUP].starts_with('/'), "{labels:?}");
        assert!(labels.contains_key(names::COMM) && labels.contains_key(names::UID));
    }

    #[test]
    fn pod_labels_are_sanitized_with_presence() {
        let pod = PodInfo {
            namespace: "payments".into(),
            name: "api-0".into(),
            labels: [("app.kubernetes.io/name".to_owned(), "api".to_owned())].into(),
            annotations: [("team".to_owned(), String::new())].into(),
            ..Default::default()
        };
        let mut out = Labels::new();
        pod_labels(&pod, None, &mut out);
        assert_eq!(out[names::NAMESPACE], "payments");
        assert_eq!(
            out["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
            "api"
        );
        assert_eq!(
            out["__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name"],
            "true"
        );
        assert_eq!(out["__meta_kubernetes_pod_annotationpresent_team"], "true");
        assert!(!out.contains_key("__meta_kubernetes_pod_annotation_team"));
    }
}
