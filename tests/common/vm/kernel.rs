//! Debian's own cloud kernels, fetched from Debian's archive with apt's own tools (a private source
//! list and package index, so the machine's apt configuration stays untouched) and cached under
//! `target/vm-cache/<release>/`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::common::root;

/// One of Debian's cloud kernels, extracted.
pub struct Kernel {
    /// The Debian release it comes from (`bookworm`).
    pub release: String,
    /// The kernel package it was extracted from (`linux-image-6.1.0-50-cloud-amd64-unsigned`).
    pub package: String,
    /// That package's version (`6.1.176-1`).
    pub version: String,
    /// The bootable image.
    pub vmlinuz: PathBuf,
}

/// The Debian archive this machine's apt is set up with (the `URIs:` of its deb822 Debian entry, or the
/// URI of a one-line `deb` entry): the other releases' kernels come from the same archive.
fn debian_archive() -> String {
    let deb822 =
        std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources").unwrap_or_default();
    let from_deb822 = deb822
        .lines()
        .filter_map(|l| l.strip_prefix("URIs:"))
        .flat_map(str::split_whitespace)
        .find(|uri| uri.trim_end_matches('/').ends_with("/debian"));
    let one_line = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    let from_one_line = one_line
        .lines()
        .filter(|l| l.trim_start().starts_with("deb "))
        .filter_map(|l| l.split_whitespace().find(|w| w.contains("://")))
        .find(|uri| uri.trim_end_matches('/').ends_with("/debian"));
    from_deb822
        .or(from_one_line)
        .map(str::to_owned)
        .expect("no Debian archive in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list: the VM tests fetch Debian's kernels from the archive apt is set up with")
}

/// The newest cloud kernel of Debian `release` (`bullseye`, `bookworm`, `trixie`), from the cache
/// when that version was fetched before. The version is resolved from the release's package index
/// on every run (never named in the tests): `linux-image-cloud-amd64` depends on the newest one.
pub fn fetch(release: &str) -> Kernel {
    let dir = root().join("target/vm-cache").join(release);
    for sub in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let sources = dir.join("sources.list");
    std::fs::write(
        &sources,
        format!("deb {} {release} main\n", debian_archive()),
    )
    .unwrap();
    apt(&dir, "apt-get", &["-qq", "update"]);
    let depends = apt(&dir, "apt-cache", &["depends", "linux-image-cloud-amd64"]);
    // "  Depends: linux-image-6.1.0-50-cloud-amd64"
    let image = depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-") && p.ends_with("-cloud-amd64"))
        .unwrap_or_else(|| {
            panic!("{release}: linux-image-cloud-amd64 names no versioned kernel:\n{depends}")
        })
        .to_owned();
    // The -unsigned package holds the same image without the Secure Boot signature (where it
    // exists); the signed package's image boots under QEMU just as well.
    let unsigned = format!("{image}-unsigned");
    let package = if version_of(&dir, &unsigned).is_some() {
        unsigned
    } else {
        image
    };
    let version = version_of(&dir, &package)
        .unwrap_or_else(|| panic!("{release}: {package} is not in the package index"));
    let extracted = dir.join(format!("{package}_{version}"));
    let vmlinuz = find_vmlinuz(&extracted);
    if let Some(vmlinuz) = vmlinuz {
        return Kernel {
            release: release.into(),
            package,
            version,
            vmlinuz,
        };
    }
    eprintln!("vm: downloading {package} {version} ({release})");
    let download = dir.join("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download).unwrap();
    apt_in(
        &dir,
        &download,
        "apt-get",
        &["-qq", "download", &format!("{package}={version}")],
    );
    let deb = std::fs::read_dir(&download)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .unwrap_or_else(|| panic!("apt-get download {package} left no .deb"));
    // Only boot/ is needed: the package's modules are most of its 100+ MiB unpacked.
    let tmp = dir.join("extract");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -x -C \"$2\" --wildcards './boot/vmlinuz-*'")
        .args(["sh", deb.to_str().unwrap(), tmp.to_str().unwrap()])
        .status()
        .expect("dpkg-deb and tar");
    assert!(
        status.success(),
        "extracting boot/vmlinuz-* from {}",
        deb.display()
    );
    let _ = std::fs::remove_dir_all(&extracted);
    // Renamed into place only once complete: an interrupted run leaves no half-extracted kernel.
    std::fs::rename(&tmp, &extracted).unwrap();
    std::fs::remove_dir_all(&download).unwrap();
    let vmlinuz = find_vmlinuz(&extracted)
        .unwrap_or_else(|| panic!("{} holds no boot/vmlinuz-*", deb.display()));
    Kernel {
        release: release.into(),
        package,
        version,
        vmlinuz,
    }
}

fn find_vmlinuz(extracted: &Path) -> Option<PathBuf> {
    std::fs::read_dir(extracted.join("boot"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
}

/// The candidate version of `package` in the private index, if it is there.
fn version_of(dir: &Path, package: &str) -> Option<String> {
    let out = apt_output(
        dir,
        dir,
        "apt-cache",
        &["show", "--no-all-versions", package],
    );
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .map(str::to_owned)
}

/// Runs an apt tool on the private index of `dir`; panics with its output when it fails.
fn apt(dir: &Path, tool: &str, args: &[&str]) -> String {
    apt_in(dir, dir, tool, args)
}

fn apt_in(dir: &Path, cwd: &Path, tool: &str, args: &[&str]) -> String {
    let out = apt_output(dir, cwd, tool, args);
    assert!(
        out.status.success(),
        "{tool} {args:?} on Debian's {} index failed (the VM tests download Debian's kernels: is \
         the archive reachable?):\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn apt_output(dir: &Path, cwd: &Path, tool: &str, args: &[&str]) -> std::process::Output {
    let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
    Command::new(tool)
        .current_dir(cwd)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args([
            "-o",
            &opt("Dir::Etc::sourcelist", &dir.join("sources.list")),
        ])
        .args(["-o", "Dir::Etc::sourceparts=-"])
        .args(["-o", &opt("Dir::State::Lists", &dir.join("lists"))])
        .args(["-o", &opt("Dir::Cache", &dir.join("cache"))])
        // apt drops to the `_apt` user to download, who cannot write into target/.
        .args(["-o", "APT::Sandbox::User=root"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {tool}: {e}"))
}
