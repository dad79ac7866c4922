//! `cargo xtask build`: sonde (with its eBPF object, built for the same architecture by
//! `agent/build.rs`) for this machine or, cross-compiled, for another architecture.

use std::process::Command;

use anyhow::bail;

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

/// The cross targets `build` knows: triple, Debian packages of its C toolchain, its gcc.
const CROSS: &[(&str, &[&str], &str)] = &[(
    "aarch64-unknown-linux-gnu",
    &["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"],
    "aarch64-linux-gnu-gcc",
)];

/// Builds sonde as `args` say; prints where the binary is.
pub fn run_build(args: &BuildArgs) -> anyhow::Result<()> {
    setup::build_toolchain()?;
    let mut cmd = Command::new(cargo());
    cmd.current_dir(root())
        .args(["build", "--package", "sonde", "--bin", "sonde"]);
    if args.release {
        cmd.arg("--release");
    }
    let profile = if args.release { "release" } else { "debug" };
    let out = match &args.target {
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
    eprintln!("xtask: built {}", out.display());
    Ok(())
}

/// Sets `cmd` up to build for `target`, installing its Rust standard library and C toolchain first
/// (idempotently).
fn cross(cmd: &mut Command, target: &str) -> anyhow::Result<()> {
    let Some((_, packages, gcc)) = CROSS.iter().find(|(t, _, _)| *t == target) else {
        let known: Vec<&str> = CROSS.iter().map(|(t, _, _)| *t).collect();
        bail!(
            "no cross toolchain known for {target}: use one of {} (or build on a {target} machine)",
            known.join(", ")
        );
    };
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
