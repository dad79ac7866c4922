//! Builds the eBPF object (with nightly, through aya-build) and compiles the vendored protobuf files.
use std::process::Command;

use anyhow::{Context as _, bail};

fn main() -> anyhow::Result<()> {
    check_bpf_toolchain()?;
    build_objects()?;
    compile_protos()
}

/// The architectures with legacy programs (`platform::arch::<arch>::LEGACY_PROGRAMS`, which a test
/// checks against the embedded object): the others load the full programs or none.
const LEGACY_ARCHITECTURES: [&str; 1] = ["x86_64"];

/// The two eBPF objects: the full one in `OUT_DIR/sonde-ebpf`, and the one for Linux 5.10 to 6.0
/// (feature `legacy`) in `OUT_DIR/legacy/sonde-ebpf`, where the target's architecture has one (cfg
/// `legacy_object`). aya-build names its output and its target directory after the package, so the
/// second build gets an `OUT_DIR` of its own.
fn build_objects() -> anyhow::Result<()> {
    let out = std::env::var_os("OUT_DIR").context("cargo sets OUT_DIR for build scripts")?;
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").context("cargo sets the target's arch")?;
    let legacy = LEGACY_ARCHITECTURES.contains(&arch.as_str());
    println!("cargo::rustc-check-cfg=cfg(legacy_object)");
    if legacy {
        println!("cargo::rustc-cfg=legacy_object");
    }
    let builds: &[(&[&str], Option<&str>)] = if legacy {
        &[(&[], None), (&["legacy"], Some("legacy"))]
    } else {
        &[(&[], None)]
    };
    for &(features, dir) in builds {
        let out_dir = match dir {
            Some(dir) => std::path::Path::new(&out).join(dir),
            None => std::path::PathBuf::from(&out),
        };
        std::fs::create_dir_all(&out_dir)?;
        // SAFETY: the build script runs no other thread while it sets the variable aya-build reads.
        unsafe { std::env::set_var("OUT_DIR", &out_dir) };
        aya_build::build_ebpf(
            [aya_build::Package {
                name: "sonde-ebpf",
                root_dir: concat!(env!("CARGO_MANIFEST_DIR"), "/../agent-ebpf"),
                features,
                ..Default::default()
            }],
            aya_build::Toolchain::Custom("nightly"),
        )?;
    }
    // SAFETY: as above.
    unsafe { std::env::set_var("OUT_DIR", &out) };
    Ok(())
}

/// Fails with the fix when the eBPF toolchain is missing, instead of a wall of linker errors.
fn check_bpf_toolchain() -> anyhow::Result<()> {
    if std::env::var_os("AYA_BUILD_SKIP").is_some() {
        return Ok(());
    }
    let linker = Command::new("bpf-linker").arg("--version").output();
    if !matches!(linker, Ok(ref out) if out.status.success()) {
        bail!(
            "bpf-linker is not installed: run `cargo xtask setup` (installs llvm-22-dev, bpf-linker, nightly rust-src)"
        );
    }
    Ok(())
}

/// Compiles `proto/` with protox (pure Rust), so no system `protoc` is needed: pprof with prost-build, the OTLP
/// profiles service (messages, gRPC client and server) with tonic-prost-build.
fn compile_protos() -> anyhow::Result<()> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto");
    println!("cargo:rerun-if-changed={root}");
    let files = ["perftools/profiles/profile.proto"];
    let descriptors = protox::compile(files, [root]).context("compiling proto/ with protox")?;
    prost_build::Config::new()
        .compile_fds(descriptors)
        .context("generating Rust code for proto/")?;

    let otlp = ["opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"];
    let descriptors =
        protox::compile(otlp, [root]).context("compiling the OTLP protos in proto/ with protox")?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)
        .context("generating Rust code for the OTLP protos")?;

    // The backends' own protocols (vendored by proto/tools/vendor_backends.py): Pyroscope's push and
    // querier services, Parca's profile store and query services. Clients for the sinks and `sonde
    // diff`, servers for the tests' receivers.
    for (name, dir, files) in [
        (
            "Pyroscope",
            "pyroscope",
            &["push/v1/push.proto", "querier/v1/querier.proto"][..],
        ),
        (
            "Parca",
            "parca",
            &[
                "parca/profilestore/v1alpha1/profilestore.proto",
                "parca/query/v1alpha1/query.proto",
            ][..],
        ),
    ] {
        let descriptors = protox::compile(files, [format!("{root}/{dir}")])
            .with_context(|| format!("compiling the {name} protos in proto/{dir} with protox"))?;
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .compile_fds(descriptors)
            .with_context(|| format!("generating Rust code for the {name} protos"))?;
    }
    Ok(())
}
