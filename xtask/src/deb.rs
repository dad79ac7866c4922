//! `cargo xtask deb`: the .deb for bare-metal hosts, made by cargo-deb from `[package.metadata.deb]` in
//! agent/Cargo.toml (binary, unit, conffile, maintainer scripts creating the `sonde` user). The binary is not
//! rebuilt by cargo-deb: it is staged where cargo-deb looks for it (`<target dir>/release/sonde`) in a target
//! directory of its own, so a binary built by `cargo test --release` can be packaged as it is.

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use crate::util::{cargo, root, run, succeeds};

/// Arguments of `cargo xtask deb`.
#[derive(clap::Args)]
pub struct DebArgs {
    /// Package this sonde binary instead of building it.
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Directory the .deb is written to.
    #[arg(long, value_name = "DIR", default_value = "target/debian")]
    pub output: PathBuf,
}

/// The cargo-deb release `setup` installs (`cargo install --locked`).
const CARGO_DEB_VERSION: &str = "3.8.0";

/// Builds the .deb and prints its path and size.
pub fn run_deb(args: &DebArgs) -> anyhow::Result<()> {
    install_cargo_deb()?;
    let binary = crate::image::sonde_binary(args.binary.as_deref())?;
    let staging = root().join("target/deb-build");
    std::fs::create_dir_all(staging.join("release"))?;
    let staged = staging.join("release/sonde");
    // A copy, not a link: cargo-deb reads the file while a later build may replace the original.
    std::fs::copy(&binary, &staged)
        .with_context(|| format!("staging {} for cargo-deb", binary.display()))?;

    let output = root().join(&args.output);
    std::fs::create_dir_all(&output)?;
    let out = Command::new(cargo())
        .current_dir(root())
        .env("CARGO_TARGET_DIR", &staging)
        .args(["deb", "--package", "sonde", "--no-build", "--no-strip"])
        .arg("--output")
        .arg(&output)
        .output()
        .context("starting cargo deb")?;
    if !out.status.success() {
        bail!(
            "cargo deb failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // cargo-deb prints the path of the package it wrote.
    let deb = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    let bytes = std::fs::metadata(&deb)
        .with_context(|| format!("cargo deb reported {}, which is missing", deb.display()))?
        .len();
    println!("deb: {}", deb.display());
    println!(
        "deb size: {:.1} MiB ({bytes} bytes)",
        bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

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
