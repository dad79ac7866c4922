//! The container image: `cargo xtask image` builds it with podman into an oci-archive. The archive is read as
//! a runtime reads it (index, manifest, config, layers): the labels name this version and revision, and the
//! image's own binary runs in the image's own filesystem with the host's /proc, /sys and /dev, as
//! `podman run --pid=host` would give it (podman cannot run containers on this VM: crun's setrlimit is
//! refused), printing its version and recording 2 s of a real workload.

use crate::common;
use crate::common::caps;
use crate::common::deploy;
use crate::common::pod;

use std::{
    io::{Read as _, Write as _},
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use common::*;
use serde_json::Value;

/// The image built by `cargo xtask image` from the binary under test, unpacked: its config and its root.
struct Image {
    dir: PathBuf,
    config: Value,
    rootfs: PathBuf,
}

fn build_image(name: &str) -> Image {
    build_image_of(name, Path::new(env!("CARGO_BIN_EXE_sonde")), None)
}

/// The image of `binary`, for Rust target `target` when given, unpacked.
fn build_image_of(name: &str, binary: &Path, target: Option<&str>) -> Image {
    let dir = temp_dir(name);
    let archive = dir.join("sonde.oci.tar");
    let built = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root())
        .args(["xtask", "image", "--binary"])
        .arg(binary)
        .args(target.map(|t| format!("--target={t}")))
        .arg("--output")
        .arg(&archive)
        .output()
        .expect("running cargo xtask image");
    let report = String::from_utf8_lossy(&built.stdout).into_owned();
    assert!(
        built.status.success(),
        "cargo xtask image failed:\n{report}\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    eprintln!("{report}");
    assert!(report.contains("image size: "), "{report}");

    let layout = dir.join("oci");
    untar(&archive, &layout);
    let index = json(&layout.join("index.json"));
    let manifest = json(&blob(&layout, &index["manifests"][0]["digest"]));
    let config = json(&blob(&layout, &manifest["config"]["digest"]));
    let rootfs = dir.join("rootfs");
    for layer in manifest["layers"].as_array().expect("layers") {
        untar(&blob(&layout, &layer["digest"]), &rootfs);
    }
    Image {
        dir,
        config,
        rootfs,
    }
}

#[test]
fn image_builds_labelled_and_its_binary_records_in_its_own_filesystem() {
    require_root();
    let Image {
        dir,
        config,
        rootfs,
    } = build_image("deploy-image");
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION"),
        "{labels}"
    );
    let head = git_head();
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap_or_default();
    assert!(
        revision == head || revision == format!("{head}-dirty"),
        "revision label {revision:?}, HEAD is {head}"
    );
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/bin/sonde"])
    );
    assert!(rootfs.join("usr/bin/sonde").is_file());
    // Minimal: the agent, its libraries and the CA bundle; no shell or other tool to run inside.
    for absent in ["bin/sh", "usr/bin/sh", "bin/busybox", "usr/bin/apt"] {
        assert!(!rootfs.join(absent).exists(), "the image holds /{absent}");
    }

    let version = in_image(&rootfs, &dir, &["--version"]);
    assert!(version.status.success(), "{version:?}");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("sonde {}", env!("CARGO_PKG_VERSION"))
    );

    let bin = build_workload("cpu_split", "cpu_split_image", FP_FLAGS);
    let workload = Workload::start(&bin, &["10"]);
    let pid = workload.pid();
    let pid_arg = pid.to_string();
    let recorded = in_image(
        &rootfs,
        &dir,
        &[
            "record",
            "--duration",
            "2",
            "--pid",
            &pid_arg,
            "--output",
            "/out/cpu.pb.gz",
        ],
    );
    drop(workload);
    let summary = String::from_utf8_lossy(&recorded.stdout);
    assert!(
        recorded.status.success(),
        "record in the image failed:\n{summary}\n{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    let samples = resolve(&read_pprof(&dir.join("out/cpu.pb.gz")));
    let all = total(&samples, pid, 0);
    // One busy thread for 2 s at 99 Hz: about 198 samples.
    assert!(all >= 100, "{all} samples of the workload\n{summary}");
    // Named from the workload's own symbols, read through /proc/PID/root from inside the image.
    assert!(
        inclusive(&samples, pid, "burn_fifty", 0) > 0,
        "no sample names burn_fifty\n{summary}"
    );
}

/// The arm64 image (`cargo xtask image --target aarch64-unknown-linux-gnu`): its config says arm64,
/// its labels this version, and its root holds the arm64 build as /usr/bin/sonde with the loader its
/// `PT_INTERP` names and every library it needs, all aarch64. (No emulator runs it here: the arm64
/// VM guests run the same binary.) With the host's image, it makes one manifest list.
#[test]
fn arm64_image_holds_the_arm64_agent_and_what_it_loads() {
    require_root();
    let binary = common::vm::Arch::Aarch64.sonde();
    let Image { config, rootfs, .. } = build_image_of(
        "deploy-image-arm64",
        &binary,
        Some("aarch64-unknown-linux-gnu"),
    );
    assert_eq!(config["architecture"], "arm64", "{config}");
    assert_eq!(config["os"], "linux", "{config}");
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    let sonde = rootfs.join("usr/bin/sonde");
    assert_eq!(
        std::fs::read(&sonde).unwrap(),
        std::fs::read(&binary).unwrap(),
        "the image's /usr/bin/sonde is not the arm64 build"
    );
    // Read with the object crate, not readelf as `cargo xtask image` reads them.
    let (interp, needed) = common::vm::initramfs::dynamic_needs(&sonde);
    let interp = interp.expect("the arm64 sonde is linked dynamically");
    let mut files = vec![rootfs.join(interp.trim_start_matches('/'))];
    files.extend(
        needed
            .iter()
            .map(|name| rootfs.join("lib/aarch64-linux-gnu").join(name)),
    );
    assert!(files.len() >= 3, "{files:?}");
    for file in files.iter().chain([&sonde]) {
        assert!(file.is_file(), "the arm64 image lacks {}", file.display());
        assert_eq!(
            deploy::elf_machine(file),
            deploy::EM_AARCH64,
            "{}",
            file.display()
        );
    }

    // One name for both architectures, as README's "Deploy" publishes them: a manifest list of the
    // two images in podman's storage, each under its platform.
    build_image("deploy-image-host");
    let version = env!("CARGO_PKG_VERSION");
    let list = "localhost/sonde-test-manifest:latest";
    let podman = |args: &[&str]| -> String {
        let out = Command::new("podman")
            .args(["--cgroup-manager=cgroupfs", "--events-backend=file"])
            .args(args)
            .output()
            .expect("running podman");
        assert!(
            out.status.success(),
            "podman {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let _ = Command::new("podman")
        .args(["--cgroup-manager=cgroupfs", "--events-backend=file"])
        .args(["manifest", "rm", list])
        .output();
    podman(&["manifest", "create", list]);
    for tag in [version.to_owned(), format!("{version}-arm64")] {
        podman(&[
            "manifest",
            "add",
            list,
            &format!("containers-storage:localhost/sonde:{tag}"),
        ]);
    }
    let inspected: Value = serde_json::from_str(&podman(&["manifest", "inspect", list])).unwrap();
    podman(&["manifest", "rm", list]);
    let mut platforms: Vec<String> = inspected["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .map(|m| {
            let field = |name: &str| m["platform"][name].as_str().unwrap_or("?").to_owned();
            format!("{}/{}", field("os"), field("architecture"))
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{inspected}");
}

#[test]
fn image_runs_as_the_daemonsets_pod_runs_it() {
    require_root();
    let Image { dir, rootfs, .. } = build_image("deploy-image-pod");
    let caps: Vec<u32> = caps::canonical()
        .iter()
        .map(|c| deploy::capability_number(c))
        .collect();
    // The pod's volumes: hostPaths made as the kubelet makes them (DirectoryOrCreate: root's, 0755) and
    // the ConfigMap's file, read-only.
    let host = dir.join("host");
    let (data, cache, config) = (host.join("data"), host.join("cache"), host.join("config"));
    for d in [&data, &cache, &config] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::copy(
        root().join("deploy/kubernetes/sonde.toml"),
        config.join("sonde.toml"),
    )
    .unwrap();
    let volumes = vec![
        pod::Volume {
            source: config,
            target: "/etc/sonde",
            read_only: true,
        },
        pod::Volume {
            source: data.clone(),
            target: "/var/lib/sonde",
            read_only: false,
        },
        pod::Volume {
            source: cache,
            target: "/var/cache/sonde",
            read_only: false,
        },
    ];

    let bin = build_workload("cpu_split", "cpu_split_pod", FP_FLAGS);
    let workload = Workload::start(&bin, &["20"]);
    // The DaemonSet's arguments, but loopback and a free port (an agent may already serve 9464 here), and
    // short windows so the first one comes quickly.
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let log = dir.join("pod.log");
    let mut agent = pod::command(&rootfs, "/usr/bin/sonde", volumes, &caps)
        .args([
            "run",
            "--config",
            "/etc/sonde/sonde.toml",
            "--metrics-addr",
            &metrics,
        ])
        .args(["--export-interval", "2", "--duration", "8"])
        .env("SONDE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("starting sonde in the emulated pod");

    // Exactly the DaemonSet's capabilities, as UID 0.
    std::thread::sleep(Duration::from_millis(300));
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.id())).unwrap();
    let field = |k: &str| {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap()
            .trim();
        u64::from_str_radix(hex, 16).unwrap()
    };
    let want = caps.iter().fold(0u64, |m, c| m | 1 << c);
    assert_eq!(field("CapEff:"), want, "effective capabilities\n{status}");
    assert_eq!(field("CapBnd:"), want, "bounding set\n{status}");

    let deadline = Instant::now() + Duration::from_secs(7);
    let (mut ready, mut live) = (0, 0);
    while Instant::now() < deadline && ready != 200 {
        std::thread::sleep(Duration::from_millis(250));
        ready = http_status(port, "/readyz");
        live = http_status(port, "/healthz");
    }
    let exit = agent.wait().unwrap();
    drop(workload);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        ready, 200,
        "/readyz never answered 200 (last {ready})\n{text}"
    );
    assert_eq!(live, 200, "/healthz answered {live}\n{text}");
    assert!(exit.success(), "sonde in the pod failed ({exit})\n{text}");
    let index = std::fs::read_to_string(data.join("index.jsonl")).unwrap_or_default();
    assert!(
        index.lines().count() > 0,
        "no profile in the data hostPath\n{text}"
    );
    // The data directory is the agent's own and private (sonde narrows what the kubelet made).
    let meta = std::fs::metadata(&data).unwrap();
    assert_eq!(meta.uid(), 0);
    assert_eq!(meta.mode() & 0o077, 0, "mode {:o}", meta.mode());
}

/// The status of `GET path` on loopback `port`; 0 when nothing answers.
fn http_status(port: u16, path: &str) -> u16 {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return 0;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// Runs the image's /usr/bin/sonde chrooted into `rootfs`, in a private mount namespace holding the host's
/// /proc, /sys and /dev (what `podman run --pid=host` mounts) and `dir/out` as /out.
fn in_image(rootfs: &Path, dir: &Path, args: &[&str]) -> Output {
    let out = dir.join("out");
    for d in [
        rootfs.join("proc"),
        rootfs.join("sys"),
        rootfs.join("dev"),
        rootfs.join("out"),
        out.clone(),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(
            r#"set -e; root=$1; shift; out=$1; shift
               mount --rbind /proc "$root/proc"; mount --rbind /sys "$root/sys"; mount --rbind /dev "$root/dev"
               mount --bind "$out" "$root/out"
               exec chroot "$root" /usr/bin/sonde "$@""#,
        )
        .arg("sh")
        .arg(rootfs)
        .arg(&out)
        .args(args)
        .env("SONDE_LOG", "warn")
        .output()
        .expect("unshare (util-linux) must be installed")
}

fn untar(archive: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    // GNU tar recognises gzip-compressed layers by themselves.
    let status = Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .status()
        .expect("running tar");
    assert!(status.success(), "tar -xf {}", archive.display());
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `blobs/sha256/<hex>` of an OCI layout for the digest `sha256:<hex>`.
fn blob(layout: &Path, digest: &Value) -> PathBuf {
    let digest = digest.as_str().expect("a digest string");
    let (algorithm, hex) = digest.split_once(':').expect("algorithm:hex");
    layout.join("blobs").join(algorithm).join(hex)
}

fn git_head() -> String {
    let out = Command::new("git")
        .current_dir(root())
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("running git");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
