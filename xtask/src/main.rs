//! `cargo xtask`: setup of the build toolchain, test and benchmark orchestration.

mod bench;
mod build;
mod deb;
mod fuzz;
mod image;
mod layers;
mod setup;
mod util;

use std::process::Command;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "sonde developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what the build needs (nightly rust-src, llvm-22-dev, bpf-linker); idempotent.
    Setup {
        /// Also install test and benchmark peers (Python packages, perf, bpftrace).
        #[arg(long)]
        peers: bool,
    },
    /// Set up, then run every test (as root: the tests load BPF programs); the fuzz targets replay
    /// their seeds and mutations of them among the unit tests.
    Test {
        /// Extra arguments for `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Set up, then run only the VM tests: sonde inside Debian's own 5.10, 6.1 and 6.12 cloud kernels
    /// under QEMU (`cargo xtask test` runs them too).
    VmTest {
        /// Extra arguments for the test harness (a test name filter, `--nocapture`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Set up, build sonde in release mode and run it with the given arguments.
    Sonde {
        /// Arguments for sonde.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Check the code's own `use` lines: no import circle anywhere, no import running up the agent's
    /// layers (ARCHITECTURE.md); the tests run the same check.
    Layers,
    /// Build sonde, for this machine or cross-compiled (`--target aarch64-unknown-linux-gnu`).
    Build(build::BuildArgs),
    /// Measure sonde's overhead against perf and bpftrace in one run.
    Bench(Box<bench::BenchArgs>),
    /// Run every cargo-fuzz target of fuzz/ for a fixed time; print executions per second and coverage.
    Fuzz(fuzz::FuzzArgs),
    /// Build the container image with podman into a local oci-archive; print its size.
    Image(image::ImageArgs),
    /// Build the .deb (binary, systemd unit, /etc/sonde/sonde.toml, `sonde` user) with cargo-deb.
    Deb(deb::DebArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Setup { peers } => {
            setup::build_toolchain()?;
            if peers {
                setup::peers()?;
            }
            Ok(())
        }
        Task::Test { args } => {
            util::require_root("the tests load BPF programs and profile real processes")?;
            setup::build_toolchain()?;
            setup::peers()?;
            // One test at a time: the BPF tests measure CPU shares and sample counts of real workloads,
            // which other tests running beside them would distort.
            let mut cmd = test_command(uses_arm64_sonde(&args))?;
            let (cargo_args, libtest_args) = split_at_dashes(&args);
            cmd.args(cargo_args)
                .args(["--", "--test-threads=1"])
                .args(libtest_args);
            // The parsers of hostile input replay their fuzz seeds and mutations of them in the unit
            // tests (sonde's `fuzzing::replay`); the coverage-guided search is `cargo xtask fuzz`, whose
            // instrumented build of the whole agent would double the time of a test run.
            util::run(&mut cmd)
        }
        Task::VmTest { args } => {
            util::require_root(
                "the VM tests' guests load BPF programs; the host builds their initramfs",
            )?;
            setup::build_toolchain()?;
            setup::peers()?;
            let mut cmd = test_command(true)?;
            cmd.args(["--test", "vm", "--", "--test-threads=1"])
                .args(&args);
            util::run(&mut cmd)
        }
        Task::Sonde { args } => {
            setup::build_toolchain()?;
            let sonde = util::build_release_sonde()?;
            // exec, so signals (Ctrl-C, SIGTERM) reach sonde itself.
            use std::os::unix::process::CommandExt as _;
            let err = Command::new(&sonde).args(&args).exec();
            Err(err).with_context(|| format!("running {}", sonde.display()))
        }
        Task::Layers => layers::check(&util::root()),
        Task::Build(args) => build::run_build(&args),
        Task::Fuzz(args) => fuzz::run_all(&args),
        Task::Image(args) => image::run_image(&args),
        Task::Deb(args) => deb::run_deb(&args),
        Task::Bench(args) => {
            util::require_root("the benchmark loads BPF programs and runs perf and bpftrace")?;
            setup::build_toolchain()?;
            setup::peers()?;
            bench::run(*args)
        }
    }
}

/// The test suites that use the arm64 sonde: the VM tests' arm64 guests, and the agent suite's
/// arm64 package and image.
const ARM64_SUITES: [&str; 2] = ["vm", "agent"];

/// Whether `cargo test` with `args` (before any `--`) runs a suite of [`ARM64_SUITES`]: all targets,
/// or one named with `--test`.
fn uses_arm64_sonde(args: &[String]) -> bool {
    let cargo_args = args.iter().take_while(|a| *a != "--");
    let mut selects = false;
    let mut prev = "";
    for arg in cargo_args {
        let named = if prev == "--test" {
            Some(arg.as_str())
        } else {
            arg.strip_prefix("--test=")
        };
        if named.is_some_and(|n| ARM64_SUITES.contains(&n)) {
            return true;
        }
        let target = [
            "--lib",
            "--bins",
            "--bin",
            "--test",
            "--tests",
            "--doc",
            "--example",
        ];
        if target
            .iter()
            .any(|t| arg == t || arg.starts_with(&format!("{t}=")))
        {
            selects = true;
        }
        prev = arg;
    }
    !selects
}

/// `cargo test --release --features sonde/test-hooks` with the environment the tests read (where setup
/// put the peers, and with `arm64` the arm64 sonde, cross-built first).
/// `cargo xtask test`'s arguments split at the first `--`: cargo's, and the test binaries' (a
/// second `--` after ours would make libtest take `--test-threads=1` for a test name filter, and
/// run the tests side by side).
fn split_at_dashes(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (args, &[]),
    }
}

fn test_command(arm64: bool) -> anyhow::Result<Command> {
    let mut cmd = Command::new(util::cargo());
    if arm64 {
        cmd.env("SONDE_TEST_SONDE_ARM64", build::arm64_for_tests()?);
    }
    cmd.env("SONDE_TEST_PYTHON", setup::peers_python());
    cmd.env(
        "SONDE_TEST_ESBUILD",
        std::env::join_paths(setup::esbuild_paths())?,
    );
    cmd.env("SONDE_TEST_JDK11", setup::jdk11_path());
    cmd.env("SONDE_TEST_RUBY27", setup::ruby27_dir());
    // `test-hooks`: the hidden flags the tests use to make the agent stall, panic or fail a
    // kernel program; release builds have none of them.
    cmd.args(["test", "--release", "--features", "sonde/test-hooks"]);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    fn uses(args: &[&str]) -> bool {
        super::uses_arm64_sonde(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_arm64_sonde_is_built_for_the_suites_that_use_it_only() {
        assert!(uses(&[]));
        assert!(uses(&["--no-fail-fast", "--", "--nocapture"]));
        assert!(uses(&["--test", "vm", "debian_12_6_1_arm64"]));
        assert!(uses(&["--test=agent"]));
        assert!(uses(&["--test", "unwind", "--test", "vm"]));
        assert!(!uses(&["--lib"]));
        assert!(!uses(&["--test", "unwind", "--", "vm"]));
        assert!(!uses(&["--test=record"]));
    }

    #[test]
    fn arguments_after_dashes_go_to_the_test_binaries_after_the_thread_count() {
        let args: Vec<String> = ["--test", "vm", "--", "--nocapture", "debian"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        let (cargo, libtest) = super::split_at_dashes(&args);
        assert_eq!((cargo, libtest), (&args[..2], &args[3..]));
        let (cargo, libtest) = super::split_at_dashes(&args[..2]);
        assert_eq!((cargo.len(), libtest.len()), (2, 0));
    }
}
