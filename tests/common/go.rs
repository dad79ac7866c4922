//! Go for the Go tests: workloads built stripped as Go services ship, Debian's own `gofmt`, and the
//! esbuild release the npm registry ships (a Go program of a recent Go release).
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::{Resolved, root, temp_dir};

/// Functions that start every Go thread or goroutine, and the switches to a thread's system stack
/// (where Go's own tracebacks end): a stack ending in one is complete.
pub const GO_ROOTS: &[&str] = &[
    "runtime.goexit",
    "runtime.mstart",
    "runtime.rt0_go",
    "runtime.systemstack",
    "runtime.mcall",
    "runtime.morestack",
];

/// Builds `tests/workloads/<name>/main.go` the way releases are built: `-ldflags='-s -w'` (no
/// `.symtab`, no DWARF) and `-trimpath`.
pub fn build_stripped(name: &str) -> PathBuf {
    let work = temp_dir("go");
    let out = work.join(format!("{name}_stripped"));
    let status = Command::new("go")
        .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(&out)
        .arg(root().join(format!("tests/workloads/{name}/main.go")))
        .env("GOCACHE", root().join("target/go-cache"))
        .env("GOPATH", work.join("gopath"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .status()
        .expect("go must be installed: Debian's golang-go (cargo xtask setup --peers)");
    assert!(status.success(), "building Go workload {name} failed");
    assert!(
        !sections(&out).contains(".symtab"),
        "{} kept a symbol table",
        out.display()
    );
    out
}

/// `readelf -S` of `path`.
pub fn sections(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-SW")
        .arg(path)
        .output()
        .expect("readelf (binutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The esbuild binary setup fetched from the npm registry.
pub fn esbuild() -> PathBuf {
    let path = std::env::var_os("SONDE_TEST_ESBUILD").map(PathBuf::from).expect(
        "SONDE_TEST_ESBUILD is not set: run the tests with `cargo xtask test`, which fetches esbuild",
    );
    assert!(
        path.exists(),
        "{} is missing: `cargo xtask setup --peers` fetches it",
        path.display()
    );
    path
}

/// The share of `samples` whose outermost frame is a Go root, and the share of their user frames that
/// have no name.
fn rooted_and_unnamed(samples: &[Resolved]) -> (f64, f64) {
    let (mut all, mut rooted, mut frames, mut unnamed) = (0i64, 0i64, 0i64, 0i64);
    for s in samples {
        let weight = s.values[0];
        all += weight;
        let user = s.user();
        if user.last().is_some_and(|f| GO_ROOTS.contains(f)) {
            rooted += weight;
        }
        frames += weight * user.len() as i64;
        unnamed += weight * user.iter().filter(|f| **f == "?").count() as i64;
    }
    assert!(all > 0, "no samples selected");
    (
        rooted as f64 / all as f64,
        unnamed as f64 / frames.max(1) as f64,
    )
}

/// Asserts that at least 90% of `samples` reach a Go root and at most 5% of their frames are unnamed.
pub fn assert_go_stacks(what: &str, samples: &[Resolved], summary: &str) {
    let (rooted, unnamed) = rooted_and_unnamed(samples);
    eprintln!("{what}: rooted {rooted:.3} unnamed {unnamed:.3}\n{summary}");
    assert!(
        rooted >= 0.9,
        "{:.1}% of {what}'s samples reach a Go root",
        rooted * 100.0
    );
    assert!(
        unnamed <= 0.05,
        "{:.1}% of {what}'s frames unnamed",
        unnamed * 100.0
    );
}
