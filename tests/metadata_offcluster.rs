//! Off Kubernetes (no NODE_NAME): the resolver runs quietly without the API; a systemd service's unit becomes
//! the service identity, other processes fall back to the executable name; the per-pid cache is bounded and
//! forgets exited pids.

use crate::common::fake_proc;
use fake_proc::fake_proc;

use sonde::metadata::{MetadataConfig, MetadataResolver};

#[tokio::test]
async fn systemd_units_and_process_names_identify_services() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("sys/kernel")).unwrap();
    std::fs::write(root.path().join("sys/kernel/hostname"), "build-host\n").unwrap();
    fake_proc(root.path(), 10, "0::/system.slice/nginx.service\n", "nginx");
    fake_proc(
        root.path(),
        11,
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "bash",
    );
    fake_proc(
        root.path(),
        12,
        "0::/system.slice/docker-6f1b3c0f2d6e4b1a9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b.scope\n",
        "redis-server",
    );
    let config = MetadataConfig {
        proc_root: root.path().to_owned(),
        cache_capacity: 2,
        region: Some("on-prem-1".into()),
        ..Default::default()
    };
    // No node name: start() must not try to reach an API server.
    let resolver = MetadataResolver::start(config).await;

    let nginx = resolver.tags_for(10);
    assert_eq!(nginx.get("service.name"), Some("nginx"));
    assert_eq!(nginx.get("systemd.unit"), Some("nginx.service"));
    assert_eq!(nginx.get("host.name"), Some("build-host"));
    assert_eq!(
        nginx.get("cloud.region"),
        Some("on-prem-1"),
        "region from config"
    );
    assert_eq!(nginx.get("k8s.pod.name"), None);

    let bash = resolver.tags_for(11);
    assert_eq!(
        bash.get("service.name"),
        Some("bash"),
        "falls back to the process name"
    );

    let redis = resolver.tags_for(12);
    assert_eq!(redis.get("container.id").map(str::len), Some(64));
    assert_eq!(redis.get("service.name"), Some("redis-server"));

    assert_eq!(resolver.cached(), 2, "bounded cache evicted the oldest pid");
    // Cached: a changed /proc does not change the answer until forget().
    fake_proc(root.path(), 12, "0::/system.slice/other.service\n", "other");
    assert_eq!(
        resolver.tags_for(12).get("service.name"),
        Some("redis-server")
    );
    resolver.forget(12);
    assert_eq!(resolver.tags_for(12).get("service.name"), Some("other"));
    // A pid that vanished still gets host-level tags.
    let gone = resolver.tags_for(999);
    assert_eq!(gone.get("process.pid"), Some("999"));
}
