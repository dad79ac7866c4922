//! Debian's own cloud kernels, fetched from Debian's archive (see [`super::apt`]) and cached under
//! `target/vm-cache/`.

use std::path::{Path, PathBuf};

use super::{Arch, apt::Index};

/// One of Debian's cloud kernels, extracted.
pub struct Kernel {
    /// The Debian release it comes from (`bookworm`).
    pub release: String,
    /// The kernel package it was extracted from (`linux-image-6.1.0-50-cloud-amd64-unsigned`).
    pub package: String,
    /// That package's version (`6.1.176-1`).
    pub version: String,
    /// The bootable image (a bzImage on x86_64, a gzipped `Image` on arm64: QEMU boots both).
    pub vmlinuz: PathBuf,
}

/// The newest cloud kernel of Debian `release` (`bullseye`, `bookworm`, `trixie`) for `arch`, from
/// the cache when that version was fetched before. The version is resolved from the release's package
/// index on every run (never named in the tests): `linux-image-cloud-<arch>` depends on the newest
/// one.
pub fn fetch(release: &str, arch: Arch) -> Kernel {
    let index = Index::update(release, arch);
    let meta = format!("linux-image-cloud-{}", arch.debian());
    let depends = index.depends(&meta);
    // "  Depends: linux-image-6.1.0-50-cloud-amd64"
    let suffix = format!("-cloud-{}", arch.debian());
    let image = depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-") && p.ends_with(&suffix))
        .unwrap_or_else(|| panic!("{release}: {meta} names no versioned kernel:\n{depends}"))
        .to_owned();
    // The -unsigned package holds the same image without the Secure Boot signature (where it
    // exists); the signed package's image boots under QEMU just as well.
    let unsigned = format!("{image}-unsigned");
    let package = if index.version_of(&unsigned).is_some() {
        unsigned
    } else {
        image
    };
    let version = index
        .version_of(&package)
        .unwrap_or_else(|| panic!("{release}: {package} is not in the package index"));
    // Only boot/ is needed: the package's modules are most of its 100+ MiB unpacked.
    let extracted = index.unpack(&package, &version, &["./boot/vmlinuz-*"]);
    let vmlinuz = find_vmlinuz(&extracted)
        .unwrap_or_else(|| panic!("{} holds no boot/vmlinuz-*", extracted.display()));
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
