//! Small process helpers shared by the tasks.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

/// The cargo that runs us.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_owned()
}

/// Runs `cmd`, failing with its command line when it fails.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// Whether `program args` runs and exits 0.
pub fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Fails unless running as root.
pub fn require_root(why: &str) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run this as root: {why}");
    }
    Ok(())
}

/// Builds `sonde` in release mode and returns its path.
pub fn build_release_sonde() -> anyhow::Result<PathBuf> {
    run(Command::new(cargo()).current_dir(root()).args([
        "build",
        "--release",
        "--package",
        "sonde",
        "--bin",
        "sonde",
    ]))?;
    Ok(root().join("target/release/sonde"))
}
