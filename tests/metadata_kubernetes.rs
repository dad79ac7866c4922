//! Kubernetes metadata end to end, without a cluster: no API server can run on the build machines, so a tiny
//! HTTP server on 127.0.0.1 inside this test replays recorded-shape API responses from tests/fixtures/k8s/
//! (the node object, the pod list for `spec.nodeName=node-1`, then a watch stream with an ADDED and a DELETED
//! pod). The real kube client and watcher consume them; a fake /proc root gives processes cgroups naming
//! those pods. Asserts the pod, namespace, container, service name/version and region resolve per process.

use crate::common::fake_proc;
use fake_proc::fake_proc;
use std::{
    io::{BufRead as _, BufReader, Write as _},
    net::TcpListener,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use sonde::metadata::{MetadataConfig, MetadataResolver, kube::KubeCache};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/k8s");
const CART_UID: &str = "0f4b2c1e-7d3a-4e5b-9c8d-1a2b3c4d5e6f";
const CART_CID: &str = "6f1b3c0f2d6e4b1a9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b";
const ENVOY_CID: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
const SEARCH_UID: &str = "7e6f5a4b-3c2d-4e1f-8a9b-0c1d2e3f4a5b";
const SEARCH_CID: &str = "c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2";
const BILLING_UID: &str = "3c2d1e0f-9a8b-4c7d-8e6f-5a4b3c2d1e0f";

/// Serves the fixtures; returns the base URL and the request lines seen.
fn serve_fixtures() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let watches = Arc::new(AtomicUsize::new(0));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (log, watches) = (log.clone(), watches.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                }
                log.lock().unwrap().push(request_line.trim().to_owned());
                let target = request_line.split_whitespace().nth(1).unwrap_or("");
                let body = if target.starts_with("/api/v1/nodes/node-1") {
                    std::fs::read_to_string(Path::new(FIXTURES).join("node.json")).unwrap()
                } else if target.starts_with("/api/v1/pods") && target.contains("watch=true") {
                    if watches.fetch_add(1, Ordering::SeqCst) > 0 {
                        // Later re-watches: hold the stream open quietly, like an idle API server.
                        std::thread::sleep(Duration::from_secs(60));
                        return;
                    }
                    std::fs::read_to_string(Path::new(FIXTURES).join("pod-watch-events.jsonl"))
                        .unwrap()
                } else if target.starts_with("/api/v1/pods") {
                    std::fs::read_to_string(Path::new(FIXTURES).join("pod-list.json")).unwrap()
                } else {
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body.as_bytes());
            });
        }
    });
    (base, seen)
}

fn systemd_cgroup(uid: &str, cid: &str) -> String {
    let uid_ = uid.replace('-', "_");
    format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{cid}.scope\n"
    )
}

#[tokio::test]
async fn pods_resolve_from_the_api_watch() {
    let (base, seen) = serve_fixtures();
    let config = kube::Config::new(base.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let cache = KubeCache::default();
    sonde::metadata::kube::start(client, "node-1", cache.clone())
        .await
        .expect("node read and watch started");

    // Wait for the watch to apply the ADDED (search) and DELETED (billing) events after the list.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while cache.pod(SEARCH_UID).is_none() || cache.pod(BILLING_UID).is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "watch events not applied; requests: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let requests = seen.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .any(|r| r.contains("fieldSelector=spec.nodeName%3Dnode-1")),
        "pods are listed for this node only: {requests:?}"
    );

    let proc_root = tempfile::tempdir().unwrap();
    fake_proc(
        proc_root.path(),
        100,
        &systemd_cgroup(CART_UID, CART_CID),
        "cart",
    );
    fake_proc(
        proc_root.path(),
        101,
        &format!("0::/kubepods/burstable/pod{CART_UID}/{ENVOY_CID}\n"),
        "envoy",
    );
    fake_proc(
        proc_root.path(),
        102,
        &systemd_cgroup(SEARCH_UID, SEARCH_CID),
        "java",
    );
    let mut static_labels = std::collections::BTreeMap::new();
    static_labels.insert("team".to_owned(), "core".to_owned());
    let resolver = MetadataResolver::new(
        MetadataConfig {
            node_name: Some("node-1".into()),
            proc_root: proc_root.path().to_owned(),
            static_labels,
            ..Default::default()
        },
        Some(cache),
    );

    let cart = resolver.tags_for(100);
    let get = |k: &str| cart.get(k).map(str::to_owned);
    assert_eq!(get("k8s.namespace.name").as_deref(), Some("shop"));
    assert_eq!(get("k8s.pod.name").as_deref(), Some("cart-7d9f8b6c5-x2x7q"));
    assert_eq!(get("k8s.pod.uid").as_deref(), Some(CART_UID));
    assert_eq!(get("k8s.container.name").as_deref(), Some("cart"));
    assert_eq!(get("container.id").as_deref(), Some(CART_CID));
    assert_eq!(
        get("service.name").as_deref(),
        Some("cart"),
        "from app.kubernetes.io/name"
    );
    assert_eq!(
        get("service.version").as_deref(),
        Some("1.4.2"),
        "from app.kubernetes.io/version"
    );
    assert_eq!(
        get("cloud.region").as_deref(),
        Some("eu-west-1"),
        "from the node label"
    );
    assert_eq!(get("k8s.node.name").as_deref(), Some("node-1"));
    assert_eq!(get("host.name").as_deref(), Some("node-1"));
    assert_eq!(get("process.pid").as_deref(), Some("100"));
    assert_eq!(get("process.executable.name").as_deref(), Some("cart"));
    assert_eq!(get("team").as_deref(), Some("core"), "static label");

    let envoy = resolver.tags_for(101);
    assert_eq!(
        envoy.get("k8s.container.name"),
        Some("envoy"),
        "container matched by runtime id"
    );
    assert_eq!(
        envoy.get("service.name"),
        Some("cart"),
        "pod label names the service"
    );

    let search = resolver.tags_for(102);
    assert_eq!(
        search.get("k8s.namespace.name"),
        Some("catalog"),
        "pod from the ADDED watch event"
    );
    assert_eq!(search.get("service.name"), Some("search"));
    assert_eq!(
        search.get("service.version"),
        Some("3.2.0"),
        "no version label: the image tag"
    );

    assert_eq!(resolver.cached(), 3);
    resolver.forget(100);
    assert_eq!(resolver.cached(), 2);
}
