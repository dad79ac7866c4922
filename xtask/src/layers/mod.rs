//! `cargo xtask layers`: checks the code's own `use` lines against the layers ARCHITECTURE.md
//! declares. The agent's top-level modules are in layers, lowest first; a module may import from its
//! own layer or below, never above. In every crate of the workspace, no two children of one module
//! may import each other, directly or around a circle. The agent's seams hold (`seams`): runtimes,
//! architectures and kernel versions are named only in their own modules. A test runs the same
//! check, so none of it can come back unnoticed.

mod graph;
mod parse;
mod seams;

use std::{collections::BTreeMap, path::Path};

use anyhow::{Context as _, bail};

use graph::{Crate, circles, siblings};

/// The crates whose module graphs must have no circle; the first is also layered.
const CRATES: &[&str] = &[
    "agent/src",
    "xtask/src",
    "agent-ebpf/src",
    "agent-ebpf/abi/src",
];

/// The fence that holds the layer table in ARCHITECTURE.md.
const FENCE: &str = "```layers";

/// The agent's layers from ARCHITECTURE.md: each top-level module's layer (0 lowest) and the
/// layer's name.
fn layers(architecture: &str) -> anyhow::Result<BTreeMap<String, (usize, String)>> {
    let block = architecture
        .split_once(FENCE)
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .with_context(|| format!("ARCHITECTURE.md has no {FENCE} block"))?;
    let mut modules = BTreeMap::new();
    for (level, line) in block.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let (name, members) = line
            .split_once(':')
            .with_context(|| format!("layer line `{line}` is not `name: module module ...`"))?;
        for module in members.split_whitespace() {
            if let Some((_, other)) =
                modules.insert(module.to_owned(), (level, name.trim().to_owned()))
            {
                bail!(
                    "module {module} is in two layers ({other} and {})",
                    name.trim()
                );
            }
        }
    }
    Ok(modules)
}

/// Every circle and upward import in the workspace, one line each (empty when the layering holds).
pub fn violations(root: &Path) -> anyhow::Result<Vec<String>> {
    let architecture =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).context("reading ARCHITECTURE.md")?;
    let layers = layers(&architecture)?;
    let mut found = Vec::new();
    for (i, src) in CRATES.iter().enumerate() {
        let krate = Crate::read(&root.join(src))
            .with_context(|| format!("reading the sources of {src}"))?;
        let edges = krate.edges();
        let name = |m: &[String]| match m.is_empty() {
            true => format!("{src} (root)"),
            false => m.join("::"),
        };
        for (parent, members, why) in circles(&edges) {
            let how: Vec<String> = why
                .iter()
                .map(|e| format!("{} -> {}", name(&e.from), name(&e.to)))
                .collect();
            found.push(format!(
                "import circle in {src} under {}: {} ({})",
                name(&parent),
                members.join(", "),
                how.join("; ")
            ));
        }
        if i != 0 {
            continue;
        }
        for top in krate.modules().filter(|m| m.len() == 1) {
            if !layers.contains_key(&top[0]) {
                found.push(format!(
                    "module {} has no layer: add it to the {FENCE} block of ARCHITECTURE.md",
                    top[0]
                ));
            }
        }
        for edge in &edges {
            let Some((parent, from, to)) = siblings(edge) else {
                continue;
            };
            if !parent.is_empty() {
                continue;
            }
            let (Some((from_level, from_layer)), Some((to_level, to_layer))) =
                (layers.get(&from), layers.get(&to))
            else {
                continue;
            };
            if to_level > from_level {
                found.push(format!(
                    "upward import: {from} ({from_layer}) imports {to} ({to_layer}): {} -> {}",
                    name(&edge.from),
                    name(&edge.to)
                ));
            }
        }
    }
    found.extend(seams::violations(root)?);
    Ok(found)
}

/// The task: prints every violation and fails if there is one.
pub fn check(root: &Path) -> anyhow::Result<()> {
    let found = violations(root)?;
    for line in &found {
        eprintln!("{line}");
    }
    if !found.is_empty() {
        bail!(
            "{} import circle(s), upward import(s) or name(s) outside their seam: move the shared item below both modules, or the named code behind its seam (see ARCHITECTURE.md, \"Layers\" and \"Seams\")",
            found.len()
        );
    }
    eprintln!("xtask: layers hold: no import circle, no upward import, every seam kept");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_has_no_import_circle_and_no_upward_import() {
        let found = violations(&crate::util::root()).unwrap();
        assert!(found.is_empty(), "{}", found.join("\n"));
    }

    #[test]
    fn a_circle_and_an_upward_import_are_found() {
        let dir = std::env::temp_dir().join(format!("sonde-layers-{}", std::process::id()));
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("low")).unwrap();
        std::fs::write(src.join("lib.rs"), "mod low; mod high;").unwrap();
        std::fs::write(src.join("low/mod.rs"), "mod a; mod b;").unwrap();
        std::fs::write(src.join("low/a.rs"), "use super::b::B; pub struct A;").unwrap();
        std::fs::write(src.join("low/b.rs"), "pub struct B(crate::low::a::A);").unwrap();
        // An upward import through a re-export: `low` names `high::Thing`, which `high` takes from
        // its child.
        std::fs::write(
            src.join("high.rs"),
            "mod inner { pub struct Thing; } pub use inner::Thing;",
        )
        .unwrap();
        std::fs::write(
            src.join("low/c.rs"),
            "fn f() -> crate::high::Thing { loop {} }",
        )
        .unwrap();
        // A test-only module may reach anything.
        std::fs::write(
            src.join("low/mod.rs"),
            "mod a; mod b; mod c; #[cfg(test)]\npub(crate) mod fixture;",
        )
        .unwrap();
        std::fs::write(src.join("low/fixture.rs"), "use crate::high::Thing;").unwrap();
        let krate = Crate::read(&src).unwrap();
        let edges = krate.edges();
        let found = circles(&edges);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, vec!["low".to_owned()]);
        assert_eq!(found[0].1, ["a", "b"]);
        let upward: Vec<_> = edges
            .iter()
            .filter_map(siblings)
            .filter(|(parent, _, _)| parent.is_empty())
            .collect();
        assert_eq!(
            upward,
            [(Vec::new(), "low".to_owned(), "high".to_owned())],
            "{edges:?}"
        );
        let layers = layers("x\n```layers\nbottom: low\ntop: high\n```\n").unwrap();
        assert_eq!(layers["low"].0, 0);
        assert_eq!(layers["high"], (1, "top".to_owned()));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
