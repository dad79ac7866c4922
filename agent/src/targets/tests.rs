//! A target is decided again when its pod's labels change: the pod from the recorded API shape
//! (tests/fixtures/k8s/pod-list.json, `cart` in namespace `shop`), a process whose cgroup names it
//! in a proc root of this test, and rules that keep the pod only while it is labelled for payments.

use std::{path::Path, sync::Arc, time::Instant};

use k8s_openapi::{List, api::core::v1::Pod};

use super::{REFRESH_EVERY, Targets};
use crate::metadata::{
    MetadataConfig, MetadataResolver,
    kube::KubeCache,
    relabel::{Rules, parse_yaml},
};

const PID: u32 = 4242;
const RULES: &str = r#"
- source_labels: [__meta_kubernetes_pod_label_team]
  regex: payments
  action: keep
- source_labels: [__meta_kubernetes_namespace]
  target_label: namespace
"#;

fn cart() -> Pod {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/k8s/pod-list.json");
    let list: List<Pod> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let pod = list.items.into_iter().next().unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("cart-7d9f8b6c5-x2x7q"));
    pod
}

/// `proc/PID` with this process's own `stat` and a cgroup naming `pod`'s first container.
fn proc_root(dir: &Path, pod: &Pod) {
    let uid = pod.metadata.uid.as_deref().unwrap().replace('-', "_");
    let statuses = pod.status.as_ref().unwrap().container_statuses.as_ref();
    let container = statuses.unwrap()[0].container_id.as_deref().unwrap();
    let cid = container.trim_start_matches("containerd://");
    let at = dir.join(PID.to_string());
    std::fs::create_dir_all(&at).unwrap();
    std::fs::copy("/proc/self/stat", at.join("stat")).unwrap();
    let cgroup = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{cid}.scope\n"
    );
    std::fs::write(at.join("cgroup"), cgroup).unwrap();
}

fn with_team(mut pod: Pod, team: &str) -> Pod {
    let labels = pod.metadata.labels.get_or_insert_default();
    labels.insert("team".into(), team.into());
    pod
}

#[test]
fn a_pods_label_change_decides_its_processes_again() {
    let dir = tempfile::tempdir().unwrap();
    let pod = cart();
    proc_root(dir.path(), &pod);
    let kube = KubeCache::default();
    let config = MetadataConfig {
        proc_root: dir.path().to_owned(),
        node_name: Some("node-1".into()),
        ..Default::default()
    };
    let resolver = Arc::new(MetadataResolver::new(config, Some(kube.clone())));
    let rules = Rules::compile(&parse_yaml(RULES).unwrap()).unwrap();
    let targets = Targets::new(rules, 99, resolver);
    let due = |t: &Targets| t.lock().last_refresh = Instant::now() - REFRESH_EVERY;

    // Before the pod is in the cache the decision is not final: dropped for now.
    assert!(!targets.decide(PID, None).kept());
    kube.apply(&with_team(pod.clone(), "search"));
    due(&targets);
    targets.refresh();
    assert!(!targets.get_or_decide(PID).kept(), "team=search is dropped");

    kube.apply(&with_team(pod.clone(), "payments"));
    due(&targets);
    targets.refresh();
    let now = targets.get_or_decide(PID);
    assert!(now.kept(), "team=payments is kept after the label change");
    assert_eq!(
        now.labels.get("namespace").map(String::as_str),
        Some("shop")
    );

    // And back: dropped again, and listed so.
    kube.apply(&with_team(pod, "search"));
    due(&targets);
    targets.refresh();
    assert!(!targets.get_or_decide(PID).kept());
    assert_eq!(targets.counts().dropped, 1);
}
