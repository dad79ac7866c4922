//! The agent's seams, checked from its code: a language runtime is named only under `runtimes/`
//! (whose `registry.rs` is the one list of them all), an architecture only under `platform/arch/`
//! (and the architecture-specific facts it says about runtimes), a kernel version only in
//! `platform/kernel.rs`; in the kernel programs, an architecture only under `regs/` (the registers a
//! walk starts from) and `unwind/step/` (how a frame's rule and a frame record read), their walkers
//! being per runtime by design. "Named" means in code: an identifier or a path, with comments, string
//! literals and tests left out (a log line or a figure's name may say "Python"; a type, a field, a
//! module path or an enum variant may not).

use std::path::Path;

use super::graph::Crate;

/// One seam: what names it owns, and where they may be written.
struct Seam {
    what: &'static str,
    /// Where the names may appear (prefixes of paths relative to `agent/src`).
    home: &'static [&'static str],
    names: fn(&str, Option<&str>) -> bool,
}

/// The seams of the agent (`agent/src`).
const AGENT: &[Seam] = &[
    Seam {
        what: "a language runtime",
        home: &["runtimes/", "platform/arch/"],
        names: names_a_runtime,
    },
    Seam {
        what: "an architecture",
        home: &["platform/arch/"],
        names: names_an_architecture,
    },
    Seam {
        what: "a kernel version",
        home: &["platform/kernel.rs"],
        names: names_a_kernel_version,
    },
];

/// The seams of the kernel programs (`agent-ebpf/src`).
const KERNEL_PROGRAMS: &[Seam] = &[Seam {
    what: "an architecture",
    home: &["regs/", "unwind/step/"],
    names: names_an_architecture,
}];

/// Whether identifier `ident` (after `previous`, the identifier before a `::`, if any) names one of
/// the runtimes.
fn names_a_runtime(ident: &str, previous: Option<&str>) -> bool {
    let lower = ident.to_ascii_lowercase();
    let words = [
        "python",
        "cpython",
        "hotspot",
        "java",
        "jvm",
        "v8",
        "gopclntab",
        "golang",
    ];
    if words.iter().any(|w| lower.contains(w)) {
        return true;
    }
    // `py_runtime`, `GO_PROCS`, `HsProc`, `GoNames`: the runtimes' own prefixes.
    let prefixed = ["py_", "go_", "hs_"].iter().any(|p| lower.starts_with(p))
        || ["Py", "Go", "Hs"].iter().any(|p| {
            ident
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_uppercase()))
        });
    // `runtimes::go`, `sonde_abi::go`, `Runtime::Node`: a runtime's module or variant.
    let segment = match previous {
        Some("runtimes" | "sonde_abi") => matches!(ident, "go" | "node"),
        Some("Runtime") => matches!(ident, "Go" | "Node"),
        _ => false,
    };
    prefixed || segment
}

/// Whether `ident` names a processor architecture.
fn names_an_architecture(ident: &str, _: Option<&str>) -> bool {
    let lower = ident.to_ascii_lowercase();
    ["x86_64", "x86", "aarch64", "arm64", "amd64", "target_arch"]
        .iter()
        .any(|a| lower.contains(a))
}

/// Whether `ident` names a kernel version or reads one.
fn names_a_kernel_version(ident: &str, _: Option<&str>) -> bool {
    let lower = ident.to_ascii_lowercase();
    [
        "kernel_version",
        "kernelversion",
        "uname",
        "utsname",
        "linux_version",
    ]
    .iter()
    .any(|k| lower.contains(k))
}

/// Every identifier of `code` with the identifier before it when a `::` joins them.
fn identifiers(code: &str) -> Vec<(usize, &str, Option<&str>)> {
    let mut out: Vec<(usize, &str, Option<&str>)> = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    let mut line = 1;
    let mut last: Option<(&str, usize)> = None;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            line += 1;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let ident = &code[start..i];
            let joined =
                last.and_then(|(prev, end)| (code[end..start].trim() == "::").then_some(prev));
            out.push((line, ident, joined));
            last = Some((ident, i));
            continue;
        }
        if c.is_ascii_digit() {
            // A number's suffix (`0u64`) is no identifier.
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Every name written outside its seam in the agent's and the kernel programs' code under `root`,
/// one line each.
pub fn violations(root: &Path) -> std::io::Result<Vec<String>> {
    let mut found = check(root, "agent/src", AGENT)?;
    found.extend(check(root, "agent-ebpf/src", KERNEL_PROGRAMS)?);
    Ok(found)
}

/// Every name of `seams` written outside its home in the crate at `root/src`.
fn check(root: &Path, src: &str, seams: &[Seam]) -> std::io::Result<Vec<String>> {
    let krate = Crate::read(&root.join(src))?;
    let mut found = Vec::new();
    for (file, code) in krate.sources() {
        let rel = file.to_string_lossy().replace('\\', "/");
        for seam in seams {
            if seam.home.iter().any(|h| rel.starts_with(h)) {
                continue;
            }
            for (line, ident, previous) in identifiers(code) {
                if (seam.names)(ident, previous) {
                    found.push(format!(
                        "{src}/{rel}:{line}: `{ident}` names {} outside {}",
                        seam.what,
                        seam.home.join(" and ")
                    ));
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_architectures_and_kernel_versions_are_found_in_code_only() {
        let dir = std::env::temp_dir().join(format!("sonde-seams-{}", std::process::id()));
        let src = dir.join("agent/src");
        std::fs::create_dir_all(src.join("runtimes")).unwrap();
        std::fs::create_dir_all(src.join("symbolize")).unwrap();
        std::fs::write(
            src.join("lib.rs"),
            "mod runtimes; mod symbolize; #[cfg(test)] mod fixture;",
        )
        .unwrap();
        std::fs::write(
            src.join("runtimes/mod.rs"),
            "pub struct PythonNames; pub mod go {}",
        )
        .unwrap();
        std::fs::write(
            src.join("symbolize/mod.rs"),
            concat!(
                "// Python frames are merged here.\n",
                "fn f() { let s = \"x86_64 python\"; }\n",
                "use crate::runtimes::go;\n",
                "fn g(n: crate::runtimes::PythonNames) {}\n",
                "#[cfg(target_arch = \"x86_64\")] fn h() {}\n",
                "fn k() -> u32 { kernel_version() }\n",
                "fn l(node_name: &str, gone: bool, good: u64) {}\n",
                "#[cfg(test)] mod tests { use crate::runtimes::go; }\n",
            ),
        )
        .unwrap();
        std::fs::write(src.join("fixture.rs"), "use crate::runtimes::PythonNames;").unwrap();
        let found = check(&dir, "agent/src", AGENT).unwrap();
        let idents: Vec<&str> = found.iter().map(|l| l.split('`').nth(1).unwrap()).collect();
        assert_eq!(
            idents,
            ["go", "PythonNames", "target_arch", "kernel_version"],
            "{found:#?}"
        );
        assert!(
            found[0].starts_with("agent/src/symbolize/mod.rs:3:"),
            "{found:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
