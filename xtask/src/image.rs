//! `cargo xtask image`: sonde's container image, built with podman from the host's release binary and the
//! shared libraries it links, into a local `oci-archive`. No registry and no network: the build context is a
//! directory prepared here (`rootfs/` plus deploy/container/Containerfile) on an empty base.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::util::{root, run};

/// Arguments of `cargo xtask image`.
#[derive(clap::Args)]
pub struct ImageArgs {
    /// Use this sonde binary instead of building it (e.g. the one `cargo test --release` just built).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Where to write the oci-archive (`target/sonde-image.oci.tar`, or
    /// `target/sonde-image-<arch>.oci.tar` for another architecture).
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// A Rust target triple: the image of another architecture (`aarch64-unknown-linux-gnu`), tagged
    /// `sonde:<version>-<arch>`, from the cross-built binary and the cross toolchain's libraries.
    #[arg(long)]
    pub target: Option<String>,
}

/// Where the image's bundle of CA certificates comes from (Debian's ca-certificates), for OTLP over https.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Builds the image and writes the archive; prints its tag, version, revision and sizes.
pub fn run_image(args: &ImageArgs) -> anyhow::Result<()> {
    crate::util::require_root("podman builds and stores the image as root here")?;
    ensure_podman()?;
    let cross = args
        .target
        .as_deref()
        .map(crate::build::cross_target)
        .transpose()?;
    let (binary, version, libraries) = match cross {
        None => {
            let binary = sonde_binary(args.binary.as_deref())?;
            let version = binary_version(&binary)?;
            let libraries = shared_libraries(&binary)?;
            (binary, version, libraries)
        }
        Some(cross) => {
            let binary = match args.binary.as_deref() {
                Some(given) => sonde_binary(Some(given))?,
                None => {
                    crate::setup::build_toolchain()?;
                    crate::build::build(Some(cross.triple), true)?
                }
            };
            // Another architecture's binary does not run here to say its version: the crate's.
            let version = crate_version()?;
            let libraries = cross_libraries(&binary, Path::new(cross.libraries))?;
            (binary, version, libraries)
        }
    };
    let revision = git_revision()?;
    let context = root().join("target/image-context");
    prepare_context(&binary, &libraries, &context)?;

    let tag = match cross {
        None => format!("localhost/sonde:{version}"),
        Some(cross) => format!("localhost/sonde:{version}-{}", cross.debian),
    };
    // A rebuild under the same tag would leave the previous image dangling in podman's storage.
    let _ = podman().args(["rmi", "--force", &tag]).output();
    run(podman()
        // One layer, no intermediate images: nothing dangling is left in podman's storage by a rebuild.
        .args(["build", "--pull=never", "--network=none", "--layers=false"])
        // No RUN step: an image of another architecture needs no emulator to build.
        .args(cross.map(|c| format!("--platform=linux/{}", c.debian)))
        .args(["--build-arg", &format!("VERSION={version}")])
        .args(["--build-arg", &format!("REVISION={revision}")])
        .args(["--tag", &tag, "--file"])
        .arg(context.join("Containerfile"))
        .arg(&context))
    .context("podman build failed (see its output above)")?;

    let output = root().join(args.output.clone().unwrap_or_else(|| match cross {
        None => "target/sonde-image.oci.tar".into(),
        Some(cross) => format!("target/sonde-image-{}.oci.tar", cross.debian).into(),
    }));
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // podman refuses to overwrite an archive.
    let _ = std::fs::remove_file(&output);
    run(podman()
        .args(["save", "--quiet", "--format", "oci-archive", "--output"])
        .arg(&output)
        .arg(&tag))?;

    let archive_bytes = std::fs::metadata(&output)?.len();
    let image_bytes = String::from_utf8(
        podman()
            .args(["image", "inspect", "--format", "{{.Size}}", &tag])
            .output()?
            .stdout,
    )?;
    println!("image: {tag}");
    println!("version: {version}");
    println!("revision: {revision}");
    println!(
        "archive: {} ({:.1} MiB)",
        output.display(),
        archive_bytes as f64 / MIB
    );
    println!(
        "image size: {:.1} MiB",
        image_bytes.trim().parse::<f64>().unwrap_or(f64::NAN) / MIB
    );
    Ok(())
}

const MIB: f64 = 1024.0 * 1024.0;

/// podman with the settings this kind of machine needs: no systemd as PID 1 (cgroupfs, events in a file).
fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.args(["--cgroup-manager=cgroupfs", "--events-backend=file"]);
    cmd
}

/// Installs podman when missing and fails with podman's own words when it cannot work here.
fn ensure_podman() -> anyhow::Result<()> {
    if !crate::util::succeeds("podman", &["--version"]) {
        crate::setup::apt_install(&["podman"], "cargo xtask image builds the container image")?;
    }
    let info = podman().arg("info").output().context("starting podman")?;
    if !info.status.success() {
        bail!(
            "podman cannot run on this machine, so the image cannot be built: {}",
            String::from_utf8_lossy(&info.stderr).trim()
        );
    }
    Ok(())
}

/// The given binary, or the release build (built now).
pub(crate) fn sonde_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(path) => {
            let path = root().join(path);
            if !path.is_file() {
                bail!(
                    "{} is not a file: pass a built sonde binary",
                    path.display()
                );
            }
            Ok(path)
        }
        None => {
            crate::setup::build_toolchain()?;
            crate::util::build_release_sonde()
        }
    }
}

/// The version the binary reports (`sonde 0.1.0`): the image is labelled with what it holds.
fn binary_version(binary: &Path) -> anyhow::Result<String> {
    let out = Command::new(binary).arg("--version").output()?;
    let text = String::from_utf8(out.stdout)?;
    match text.split_whitespace().collect::<Vec<_>>()[..] {
        ["sonde", version] if out.status.success() => Ok(version.to_owned()),
        _ => bail!(
            "{} --version printed {text:?}, expected `sonde VERSION`",
            binary.display()
        ),
    }
}

/// The agent crate's version (`version` of agent/Cargo.toml's `[package]`).
fn crate_version() -> anyhow::Result<String> {
    let manifest = std::fs::read_to_string(root().join("agent/Cargo.toml"))?;
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .map(str::to_owned)
        .context("agent/Cargo.toml names no `version = \"...\"`")
}

/// `git rev-parse HEAD`, with `-dirty` when the work tree has changes the commit does not hold.
fn git_revision() -> anyhow::Result<String> {
    let git = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("git")
            .current_dir(root())
            .args(args)
            .output()?;
        if !out.status.success() {
            bail!(
                "git {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_owned())
    };
    let head = git(&["rev-parse", "HEAD"]).context("labelling the image with its revision")?;
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    Ok(if dirty { format!("{head}-dirty") } else { head })
}

/// `context/Containerfile` and `context/rootfs/`: the binary as /usr/bin/sonde, its shared libraries
/// and dynamic loader (`libraries`: where each goes, and its file) and the CA bundle.
fn prepare_context(
    binary: &Path,
    libraries: &[(PathBuf, PathBuf)],
    context: &Path,
) -> anyhow::Result<()> {
    if context.exists() {
        std::fs::remove_dir_all(context)
            .with_context(|| format!("emptying {}", context.display()))?;
    }
    let rootfs = context.join("rootfs");
    let mut files = vec![(binary.to_owned(), PathBuf::from("usr/bin/sonde"))];
    for (inside, lib) in libraries {
        let inside = inside.strip_prefix("/").unwrap_or(inside).to_owned();
        files.push((lib.clone(), inside));
    }
    if Path::new(CA_BUNDLE).exists() {
        files.push((CA_BUNDLE.into(), CA_BUNDLE.trim_start_matches('/').into()));
    } else {
        eprintln!(
            "xtask: {CA_BUNDLE} is missing (apt-get install ca-certificates): the image will trust no CA for OTLP over https"
        );
    }
    for (from, to) in files {
        let to = rootfs.join(to);
        std::fs::create_dir_all(to.parent().expect("a file inside rootfs"))?;
        // fs::copy follows symlinks: the image gets the library itself under the name the binary uses.
        std::fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    }
    std::fs::copy(
        root().join("deploy/container/Containerfile"),
        context.join("Containerfile"),
    )
    .context("copying deploy/container/Containerfile")?;
    Ok(())
}

/// The libraries (and loader) `ldd` resolves for `binary`, each at its own path; none for a static
/// binary.
fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<(PathBuf, PathBuf)>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd (Debian package libc-bin)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable") || text.contains("statically linked") {
            return Ok(Vec::new());
        }
        bail!(
            "ldd {} failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(parse_ldd(&text)?
        .into_iter()
        .map(|p| (p.clone(), p))
        .collect())
}

/// The loader and libraries of `binary`, built for another architecture (so `ldd` cannot run it),
/// from `readelf`: the loader at the path its `PT_INTERP` names, each `DT_NEEDED` library
/// (transitively) in `/lib/<triplet>/` (Debian's multiarch directory, which the loader searches),
/// their files from `sysroot`.
fn cross_libraries(binary: &Path, sysroot: &Path) -> anyhow::Result<Vec<(PathBuf, PathBuf)>> {
    let triplet = sysroot
        .parent()
        .and_then(Path::file_name)
        .context("the cross libraries' directory is <sysroot>/<triplet>/lib")?;
    let readelf = |args: &[&str], file: &Path| -> anyhow::Result<String> {
        let out = Command::new("readelf")
            .args(args)
            .arg(file)
            .output()
            .context("running readelf (Debian package binutils)")?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut found = Vec::new();
    let headers = readelf(&["-lW"], binary)?;
    if let Some(interp) = headers
        .lines()
        .find_map(|l| l.split_once("[Requesting program interpreter: "))
        .and_then(|(_, rest)| rest.strip_suffix(']'))
    {
        let name = Path::new(interp).file_name().context("a loader path")?;
        found.push((PathBuf::from(interp), sysroot.join(name)));
    }
    let mut queue = vec![binary.to_owned()];
    while let Some(file) = queue.pop() {
        for line in readelf(&["-dW"], &file)?.lines() {
            let Some(name) = line
                .split_once("Shared library: [")
                .and_then(|(_, rest)| rest.strip_suffix(']'))
            else {
                continue;
            };
            let inside = Path::new("/lib").join(triplet).join(name);
            if found.iter().any(|(i, _)| *i == inside) {
                continue;
            }
            let lib = sysroot.join(name);
            if !lib.exists() {
                bail!(
                    "{} needs {name}, which is not in {} (cargo xtask build --target installs the cross toolchain)",
                    file.display(),
                    sysroot.display()
                );
            }
            queue.push(lib.clone());
            found.push((inside, lib));
        }
    }
    Ok(found)
}

/// Paths from ldd's lines `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and
/// `/lib64/ld-linux-x86-64.so.2 (0x...)`; the vDSO has no file and is skipped.
fn parse_ldd(text: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not found") {
            bail!("a library of the binary is missing on this host: {line}");
        }
        if line == "statically linked" {
            continue;
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_libraries_and_loader_not_the_vdso() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f31)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f31)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f31)\n";
        assert_eq!(
            parse_ldd(text).unwrap(),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn a_missing_library_is_an_error() {
        let err = parse_ldd("\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(err.to_string().contains("libfoo.so.1"), "{err}");
    }
}
