//! `cargo xtask deb`: the .deb for bare-metal hosts, made by cargo-deb from `[package.metadata.deb]` in
//! agent/Cargo.toml (binary, unit, conffile, maintainer scripts creating the `sonde` user). The binary is not
//! rebuilt by cargo-deb: it is staged where cargo-deb looks for it (`<target dir>/release/sonde`) in a target
//! directory of its own, so a binary built by `cargo test --release` can be packaged as it is.

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use crate::util::{cargo, root};

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

/// Builds the .deb and prints its path and size.
pub fn run_deb(args: &DebArgs) -> anyhow::Result<()> {
    crate::setup::install_cargo_deb()?;
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
