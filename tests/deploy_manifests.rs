//! The Kubernetes base (deploy/kubernetes): every manifest and the rendered kustomize output pass
//! `kubernetes-validate --strict` against the oldest (1.25, DaemonSet surge) and newest Kubernetes it knows,
//! and the DaemonSet's security settings are pinned: a later edit cannot quietly add `privileged`, a
//! capability beyond deploy/capabilities.txt, a writable host mount or another API permission.
//!
//! Rendering: real kustomize, as `kubectl kustomize` (kustomize v5.5 in kubectl 1.32 on this machine
//! image; no Debian package ships it, so `cargo xtask setup --peers` checks that it is there and says so
//! when it is not).

use crate::common;
use crate::common::caps;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use common::{python, root, temp_dir};
use serde_json::Value;

const OLDEST: &str = "1.25.0";
const NEWEST: &str = "1.37.0";

fn base() -> PathBuf {
    root().join("deploy/kubernetes")
}

/// The kustomize output as JSON (and as YAML in `dir/rendered.yaml`).
fn render(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(base())
        .output()
        .expect("kubectl (kustomize) must be installed: see cargo xtask setup --peers");
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/kubernetes failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = dir.join("rendered.yaml");
    std::fs::write(&yaml, &out.stdout).unwrap();
    let json = Command::new(python())
        .args([
            "-c",
            "import json,sys,yaml; json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)",
        ])
        .arg(&yaml)
        .output()
        .expect("running the test peers' Python (cargo xtask setup --peers)");
    assert!(
        json.status.success(),
        "reading kustomize's YAML failed: {}",
        String::from_utf8_lossy(&json.stderr)
    );
    serde_json::from_slice(&json.stdout).expect("PyYAML prints JSON")
}

/// `kubernetes-validate --strict` on `files` for `version`; panics unless every resource passed.
fn validate(files: &[PathBuf], version: &str) -> String {
    let out = Command::new(python())
        .args(["-m", "kubernetes_validate", "--strict", "-k", version])
        .args(files)
        .output()
        .expect("kubernetes-validate (tests/peers/requirements.txt) must be installed");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "kubernetes-validate {version} failed:\n{text}"
    );
    text
}

fn manifest_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(base())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        // Not a Kubernetes object: read by kustomize.
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_manifest_and_the_rendered_base_pass_kubernetes_validate() {
    let dir = temp_dir("deploy-manifests");
    let rendered = render(&dir);
    let files = manifest_files();
    assert!(files.len() >= 5, "{files:?}");
    for version in [OLDEST, NEWEST] {
        let text = validate(&[dir.join("rendered.yaml")], version);
        let passed = text.matches("passed for resource").count();
        assert_eq!(
            passed,
            rendered.len(),
            "not every resource was validated:\n{text}"
        );
        let text = validate(&files, version);
        // The PodMonitor's CRD is not part of Kubernetes: the validator only warns about it, so it is
        // checked against the DaemonSet below instead.
        for line in text.lines().filter(|l| !l.contains("passed for resource")) {
            assert!(
                line.contains("podmonitor.yaml") && line.contains("Couldn't find schema"),
                "unexpected validator output: {line}"
            );
        }
    }
}

#[test]
fn the_validator_rejects_a_misspelt_field() {
    // The negative control: strict validation of the DaemonSet with one field misspelt must fail, or the
    // passes above prove nothing.
    let dir = temp_dir("deploy-manifests-negative");
    let text = std::fs::read_to_string(base().join("daemonset.yaml")).unwrap();
    assert!(text.contains("      hostPID: true\n"));
    let broken = dir.join("daemonset.yaml");
    std::fs::write(
        &broken,
        text.replace("      hostPID: true\n", "      hostPid: true\n"),
    )
    .unwrap();
    let out = Command::new(python())
        .args(["-m", "kubernetes_validate", "--strict", "-k", NEWEST])
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a misspelt field passed validation");
}

fn find<'a>(resources: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = resources.iter().filter(|r| r["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}");
    found[0]
}

/// deploy/capabilities.txt as Kubernetes names (`CAP_BPF` → `BPF`).
fn measured_capabilities() -> BTreeSet<String> {
    caps::canonical()
        .iter()
        .map(|c| c.trim_start_matches("CAP_").to_owned())
        .collect()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn daemonset_runs_with_the_measured_capabilities_only() {
    let dir = temp_dir("deploy-manifests-security");
    let resources = render(&dir);
    let ds = find(&resources, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["hostPID"], true,
        "the agent profiles every process of the node"
    );
    assert_ne!(pod["hostNetwork"], true);
    assert_ne!(pod["hostIPC"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );

    let caps = measured_capabilities();
    assert!(
        !caps.contains("SYS_ADMIN"),
        "deploy/capabilities.txt grants SYS_ADMIN"
    );
    let containers: Vec<&Value> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| pod[k].as_array().into_iter().flatten())
        .collect();
    assert_eq!(containers.len(), 1, "one container, the agent");
    for c in &containers {
        let sc = &c["securityContext"];
        assert_eq!(sc["privileged"], false, "{}", c["name"]);
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{}", c["name"]);
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{}", c["name"]);
        assert_eq!(
            strings(&sc["capabilities"]["drop"]),
            BTreeSet::from(["ALL".to_owned()])
        );
        let added = strings(&sc["capabilities"]["add"]);
        assert!(
            !added
                .iter()
                .any(|c| c.trim_start_matches("CAP_") == "SYS_ADMIN"),
            "SYS_ADMIN added: {added:?}"
        );
        assert_eq!(
            added, caps,
            "capabilities differ from deploy/capabilities.txt"
        );
        // A container-level user would override the pod's; only UID 0 gets added capabilities.
        assert!(sc.get("runAsUser").is_none() && sc.get("runAsNonRoot").is_none());
    }
    assert_eq!(pod["securityContext"]["runAsUser"], 0);

    // Host paths: tracefs and cgroups read-only; only the spool and cache directories writable.
    let agent = containers[0];
    let mounts = agent["volumeMounts"].as_array().unwrap();
    for volume in pod["volumes"].as_array().unwrap() {
        let Some(host) = volume["hostPath"]["path"].as_str() else {
            continue;
        };
        let mount = mounts
            .iter()
            .find(|m| m["name"] == volume["name"])
            .unwrap_or_else(|| panic!("hostPath {host} is not mounted"));
        match host {
            "/sys/kernel/tracing" | "/sys/fs/cgroup" => {
                assert_eq!(mount["readOnly"], true, "{host} must be read-only")
            }
            "/var/lib/sonde" | "/var/cache/sonde" => {}
            other => panic!("unexpected hostPath {other}"),
        }
    }
    let host_paths: BTreeSet<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["hostPath"]["path"].as_str())
        .collect();
    assert_eq!(
        host_paths,
        BTreeSet::from([
            "/sys/kernel/tracing",
            "/sys/fs/cgroup",
            "/var/lib/sonde",
            "/var/cache/sonde"
        ])
    );
}

#[test]
fn daemonset_is_wired_for_operation() {
    let dir = temp_dir("deploy-manifests-wiring");
    let resources = render(&dir);
    let ds = find(&resources, "DaemonSet");
    let template = &ds["spec"]["template"];
    let pod = &template["spec"];
    let agent = &pod["containers"][0];

    // The image placeholder, replaced with `kustomize edit set image sonde=...`.
    assert_eq!(agent["image"], "sonde:REPLACE_ME");
    let args = strings(&agent["args"]);
    for arg in ["run", "--config", "/etc/sonde/sonde.toml"] {
        assert!(args.contains(arg), "args lack {arg}: {args:?}");
    }
    let node_name = agent["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .expect("NODE_NAME");
    assert_eq!(
        node_name["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );

    // Probes on the metrics port.
    let port = agent["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("a port named metrics");
    assert_eq!(port["containerPort"], 9464);
    assert_eq!(agent["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(agent["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(agent[probe]["httpGet"]["port"], "metrics");
    }
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "9464");

    // Requests and limits both set, requests within limits.
    let resources_ = &agent["resources"];
    for (kind, unit) in [
        ("cpu", cpu_millis as fn(&str) -> f64),
        ("memory", mebibytes),
    ] {
        let request = unit(resources_["requests"][kind].as_str().expect("a request"));
        let limit = unit(resources_["limits"][kind].as_str().expect("a limit"));
        assert!(
            request > 0.0 && request <= limit,
            "{kind}: {request} > {limit}"
        );
    }

    // Every node, scheduled first, replaced without a gap.
    assert!(
        pod["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["operator"] == "Exists"
                && t.get("key").is_none()
                && t.get("effect").is_none()),
        "no toleration for every taint"
    );
    let priority = find(&resources, "PriorityClass");
    assert_eq!(pod["priorityClassName"], priority["metadata"]["name"]);
    let update = &ds["spec"]["updateStrategy"];
    assert_eq!(update["type"], "RollingUpdate");
    // No surge: two agents cannot share the node's data directory (the second one refuses to start), so
    // a surged pod would never become ready and the rollout would stall.
    assert_eq!(update["rollingUpdate"]["maxSurge"], 0);
    let unavailable = &update["rollingUpdate"]["maxUnavailable"];
    assert!(
        unavailable.as_u64().is_some_and(|n| n >= 1)
            || unavailable
                .as_str()
                .is_some_and(|p| p.ends_with('%') && p != "0%"),
        "maxUnavailable {unavailable}"
    );

    // The config: the generated ConfigMap is the one mounted, and sonde accepts its sonde.toml.
    let config_map = find(&resources, "ConfigMap");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v.get("configMap").is_some())
        .expect("a ConfigMap volume");
    assert_eq!(volume["configMap"]["name"], config_map["metadata"]["name"]);
    assert!(
        config_map["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("sonde-config-")
    );
    let toml = config_map["data"]["sonde.toml"]
        .as_str()
        .expect("sonde.toml");
    let config = sonde::config::DaemonConfig::merge(
        Some((Path::new("sonde.toml"), toml)),
        &sonde::config::RunArgs::default(),
        &|_| None,
    )
    .expect("sonde rejects the ConfigMap's sonde.toml");
    assert_eq!(config.data_dir, PathBuf::from("/var/lib/sonde"));
    // All interfaces, so the kubelet's probes and Prometheus reach it on the pod IP.
    assert_eq!(config.metrics_addr, Some("0.0.0.0:9464".parse().unwrap()));
    let data_mount = agent["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/var/lib/sonde");
    assert!(data_mount.is_some(), "data_dir is not a mounted volume");

    // Every resource in one namespace, labelled as part of sonde.
    for r in &resources {
        let kind = r["kind"].as_str().unwrap();
        if ![
            "Namespace",
            "ClusterRole",
            "ClusterRoleBinding",
            "PriorityClass",
        ]
        .contains(&kind)
        {
            assert_eq!(r["metadata"]["namespace"], "sonde", "{kind}");
        }
        assert_eq!(
            r["metadata"]["labels"]["app.kubernetes.io/part-of"], "sonde",
            "{kind}"
        );
    }
}

#[test]
fn rbac_reads_pods_and_nodes_only() {
    let dir = temp_dir("deploy-manifests-rbac");
    let resources = render(&dir);
    let ds = find(&resources, "DaemonSet");
    let account = find(&resources, "ServiceAccount");
    assert_eq!(
        ds["spec"]["template"]["spec"]["serviceAccountName"],
        account["metadata"]["name"]
    );
    let role = find(&resources, "ClusterRole");
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(strings(&rule["apiGroups"]), BTreeSet::from([String::new()]));
        for resource in strings(&rule["resources"]) {
            assert!(["pods", "nodes"].contains(&resource.as_str()), "{resource}");
        }
        for verb in strings(&rule["verbs"]) {
            assert!(["get", "list", "watch"].contains(&verb.as_str()), "{verb}");
        }
        assert!(rule.get("nonResourceURLs").is_none() && rule.get("resourceNames").is_none());
    }
    assert!(
        resources
            .iter()
            .all(|r| r["kind"] != "Role" && r["kind"] != "RoleBinding")
    );
    let binding = find(&resources, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    let subjects = binding["subjects"].as_array().unwrap();
    assert_eq!(subjects.len(), 1);
    assert_eq!(subjects[0]["kind"], "ServiceAccount");
    assert_eq!(subjects[0]["name"], account["metadata"]["name"]);
    assert_eq!(subjects[0]["namespace"], account["metadata"]["namespace"]);
}

#[test]
fn podmonitor_example_scrapes_the_daemonsets_metrics_port() {
    let dir = temp_dir("deploy-manifests-podmonitor");
    let resources = render(&dir);
    assert!(
        resources.iter().all(|r| r["kind"] != "PodMonitor"),
        "the PodMonitor's CRD may be absent"
    );
    let out = Command::new(python())
        .args([
            "-c",
            "import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)",
        ])
        .arg(base().join("podmonitor.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let monitor: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["kind"], "PodMonitor");
    let ds = find(&resources, "DaemonSet");
    assert_eq!(
        monitor["metadata"]["namespace"],
        ds["metadata"]["namespace"]
    );
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pod_labels[k], v, "selector {k} does not match the pods");
    }
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    let ports = ds["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap();
    assert!(
        ports.iter().any(|p| p["name"] == endpoint["port"]),
        "no port {}",
        endpoint["port"]
    );
}

/// A Kubernetes CPU quantity (`20m`, `1`, `0.5`) in millicores.
fn cpu_millis(q: &str) -> f64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => q.parse::<f64>().unwrap() * 1000.0,
    }
}

/// A Kubernetes memory quantity with a binary suffix (`256Mi`, `1Gi`) in MiB.
fn mebibytes(q: &str) -> f64 {
    if let Some(n) = q.strip_suffix("Gi") {
        n.parse::<f64>().unwrap() * 1024.0
    } else if let Some(n) = q.strip_suffix("Mi") {
        n.parse().unwrap()
    } else {
        panic!("memory quantity {q}: use Mi or Gi")
    }
}
