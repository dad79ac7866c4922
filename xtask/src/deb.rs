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
    /// A Rust target triple: the .deb of another architecture (`aarch64-unknown-linux-gnu` makes
    /// `sonde_<version>_arm64.deb`), from the cross-built binary.
    #[arg(long)]
    pub target: Option<String>,
}

/// Builds the .deb and prints its path and size.
pub fn run_deb(args: &DebArgs) -> anyhow::Result<()> {
    crate::setup::install_cargo_deb()?;
    let cross = args
        .target
        .as_deref()
        .map(crate::build::cross_target)
        .transpose()?;
    let binary = match (cross, args.binary.as_deref()) {
        (Some(cross), None) => {
            crate::setup::build_toolchain()?;
            crate::build::build(Some(cross.triple), true)?
        }
        (_, given) => crate::image::sonde_binary(given)?,
    };
    let staging = root().join("target/deb-build");
    // Where cargo-deb looks for the binary: `release/`, or `<triple>/release/` with `--target`.
    let release = match cross {
        None => staging.join("release"),
        Some(cross) => staging.join(cross.triple).join("release"),
    };
    std::fs::create_dir_all(&release)?;
    let staged = release.join("sonde");
    // A copy, not a link: cargo-deb reads the file while a later build may replace the original.
    std::fs::copy(&binary, &staged)
        .with_context(|| format!("staging {} for cargo-deb", binary.display()))?;

    let output = root().join(&args.output);
    std::fs::create_dir_all(&output)?;
    // With `--target`, cargo-deb names the package's architecture and resolves its libc dependency
    // for that target (dpkg-shlibdeps on the cross toolchain's libraries).
    let out = Command::new(cargo())
        .current_dir(root())
        .env("CARGO_TARGET_DIR", &staging)
        .args(["deb", "--package", "sonde", "--no-build", "--no-strip"])
        .args(cross.map(|c| format!("--target={}", c.triple)))
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
