//! `cargo xtask build`: sonde (with its eBPF object, built for the same architecture by
//! `agent/build.rs`) for this machine or, cross-compiled, for another architecture.

use std::process::Command;

use crate::{
    setup,
    util::{cargo, root, run, succeeds},
};

/// What `cargo xtask build` takes.
#[derive(clap::Args)]
pub struct BuildArgs {
    /// Optimised build (as the image and the .deb ship it).
    #[arg(long)]
    release: bool,
    /// A Rust target triple: `aarch64-unknown-linux-gnu` cross-builds for arm64 with Debian's
    /// `gcc-aarch64-linux-gnu` as linker and C compiler; the machine's own when absent.
    #[arg(long)]
    target: Option<String>,
}

/// A cross target `build` knows.
pub struct Cross {
    /// The Rust target triple.
    pub triple: &'static str,
    /// Debian's name of its architecture (packages, images' `--platform linux/<arch>`).
    pub debian: &'static str,
    /// The Debian packages of its C toolchain.
    packages: &'static [&'static str],
    /// Its gcc.
    gcc: &'static str,
    /// Where its libraries are (the image takes the binary's from there).
    pub libraries: &'static str,
}

/// The cross targets `build` knows.
const CROSS: &[Cross] = &[Cross {
    triple: "aarch64-unknown-linux-gnu",
    debian: "arm64",
    packages: &["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"],
    gcc: "aarch64-linux-gnu-gcc",
    libraries: "/usr/aarch64-linux-gnu/lib",
}];

/// The cross target `triple`, or an error naming those known.
pub fn cross_target(triple: &str) -> anyhow::Result<&'static Cross> {
    CROSS.iter().find(|c| c.triple == triple).ok_or_else(|| {
        let known: Vec<&str> = CROSS.iter().map(|c| c.triple).collect();
        anyhow::anyhow!(
            "no cross toolchain known for {triple}: use one of {} (or build on a {triple} machine)",
            known.join(", ")
        )
    })
}

/// Builds sonde as `args` say; prints where the binary is.
pub fn run_build(args: &BuildArgs) -> anyhow::Result<()> {
    setup::build_toolchain()?;
    let out = build(args.target.as_deref(), args.release)?;
    eprintln!("xtask: built {}", out.display());
    Ok(())
}

/// The arm64 sonde the VM tests' arm64 guests run: what `cargo xtask build --release --target
/// aarch64-unknown-linux-gnu` makes (the guests use none of the tests' hooks).
pub fn arm64_for_tests() -> anyhow::Result<std::path::PathBuf> {
    eprintln!("xtask: cross-building sonde for the arm64 VM guests");
    build(Some("aarch64-unknown-linux-gnu"), true)
}

/// Builds sonde for `target` (this machine's when None); the binary.
pub fn build(target: Option<&str>, release: bool) -> anyhow::Result<std::path::PathBuf> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root())
        .args(["build", "--package", "sonde", "--bin", "sonde"]);
    if release {
        cmd.arg("--release");
    }
    let profile = if release { "release" } else { "debug" };
    let out = match target {
        None => root().join("target").join(profile).join("sonde"),
        Some(target) => {
            cross(&mut cmd, target)?;
            root()
                .join("target")
                .join(target)
                .join(profile)
                .join("sonde")
        }
    };
    run(&mut cmd)?;
    Ok(out)
}

/// Sets `cmd` up to build for `target`, installing its Rust standard library and C toolchain first
/// (idempotently).
fn cross(cmd: &mut Command, target: &str) -> anyhow::Result<()> {
    let Cross { packages, gcc, .. } = cross_target(target)?;
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()?;
    if !String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l == target)
    {
        eprintln!("xtask: installing the Rust standard library for {target}");
        run(Command::new("rustup").args(["target", "add", target]))?;
    }
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !succeeds("dpkg", &["-s", p]))
        .collect();
    if !missing.is_empty() {
        setup::apt_install(
            &missing,
            "cross-compiling sonde links with the target's gcc",
        )?;
    }
    // Cargo's and the cc crate's variables for this target: the linker, and the C compiler of the
    // crates with C parts (ring, zstd).
    let var = target.replace('-', "_");
    cmd.env(format!("CARGO_TARGET_{}_LINKER", var.to_uppercase()), gcc)
        .env(format!("CC_{var}"), gcc)
        .args(["--target", target]);
    Ok(())
}
