//! A crate's modules and the imports between them: which module each file is, what each import
//! reaches (through re-exports), and the circles among the children of each module.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use super::parse::{Paths, code_of, paths_of, test_modules};

/// A module by its path from the crate root (`["bpf", "loader"]`; the root is empty).
pub type ModPath = Vec<String>;

/// The non-test modules of one crate, each with its imports (raw paths, as written).
pub struct Crate {
    modules: BTreeMap<ModPath, Paths>,
    /// Each module's file (relative to `src`) and code (`parse::code_of`), test modules left out.
    sources: BTreeMap<ModPath, (std::path::PathBuf, String)>,
    /// What each module imports under which name (`use a::b as c` gives `c` -> `a::b`), resolved.
    imported: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
}

/// One import of one module by another.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: ModPath,
    pub to: ModPath,
}

impl Crate {
    /// Reads every `.rs` file under `src` (a crate's `src/`; `lib.rs` is the root, else `main.rs`).
    /// Test modules (`tests`, `*_tests`, and `#[cfg(test)]` items) are left out: tests may reach
    /// anything.
    /// Each non-test module's file (relative to the crate's `src`) and code, comments, literals and
    /// `#[cfg(test)]` items left out.
    pub fn sources(&self) -> impl Iterator<Item = &(std::path::PathBuf, String)> {
        self.sources.values()
    }

    pub fn read(src: &Path) -> std::io::Result<Self> {
        let mut files = Vec::new();
        walk(src, &mut files)?;
        let has_lib = src.join("lib.rs").exists();
        let mut modules = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut test_only = Vec::new();
        for file in files {
            let rel = file.strip_prefix(src).expect("under src");
            let mut path: ModPath = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            match path.last().map(String::as_str) {
                Some("mod") => {
                    path.pop();
                }
                Some("lib") if path.len() == 1 => path.clear(),
                Some("main") if path.len() == 1 => {
                    if has_lib {
                        continue;
                    }
                    path.clear();
                }
                _ => {}
            }
            if path.iter().any(|s| s == "tests" || s.ends_with("_tests")) {
                continue;
            }
            let text = std::fs::read_to_string(&file)?;
            for name in test_modules(&text) {
                let mut child = path.clone();
                child.push(name);
                test_only.push(child);
            }
            let code = code_of(&text);
            modules.insert(path.clone(), paths_of(&code));
            sources.insert(path, (rel.to_path_buf(), code));
        }
        // A module declared `#[cfg(test)]` is a test, and so is everything under it.
        modules.retain(|m: &ModPath, _| !test_only.iter().any(|t| m.starts_with(t)));
        sources.retain(|m: &ModPath, _| !test_only.iter().any(|t| m.starts_with(t)));
        let mut krate = Self {
            modules,
            sources,
            imported: BTreeMap::new(),
        };
        krate.imported = krate
            .modules
            .iter()
            .map(|(m, paths)| {
                let names = paths
                    .uses
                    .iter()
                    .zip(&paths.names)
                    .filter_map(|(p, name)| Some((name.clone(), krate.absolute(m, p)?)))
                    .collect();
                (m.clone(), names)
            })
            .collect();
        Ok(krate)
    }

    /// The modules.
    pub fn modules(&self) -> impl Iterator<Item = &ModPath> {
        self.modules.keys()
    }

    /// `path` as written in module `from`, from the crate root; None for another crate's.
    fn absolute(&self, from: &ModPath, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => from.clone(),
            // A child module named without `self::` (edition 2018 paths).
            _ => {
                let mut child = from.clone();
                child.push(first.clone());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                from.clone()
            }
        };
        let mut rest = path;
        if first == "crate" || first == "self" {
            rest = &path[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module an absolute path reaches: its longest prefix that is a module, followed through
    /// that module's imports when the rest names something it imported (a re-export).
    fn target(&self, mut path: Vec<String>) -> Option<ModPath> {
        for _ in 0..8 {
            let module = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| self.modules.contains_key(p))?;
            let Some(name) = path.get(module.len()) else {
                return Some(module);
            };
            match self.imported.get(&module).and_then(|names| names.get(name)) {
                Some(via) if via != &path[..module.len() + 1] => {
                    let mut next = via.clone();
                    next.extend(path[module.len() + 1..].iter().cloned());
                    path = next;
                }
                _ => return Some(module),
            }
        }
        None
    }

    /// Every import of one module by another.
    pub fn edges(&self) -> BTreeSet<Edge> {
        let mut edges = BTreeSet::new();
        for (from, paths) in &self.modules {
            for path in paths.uses.iter().chain(&paths.inline) {
                let Some(to) = self.absolute(from, path).and_then(|p| self.target(p)) else {
                    continue;
                };
                if &to != from {
                    edges.insert(Edge {
                        from: from.clone(),
                        to,
                    });
                }
            }
        }
        edges
    }
}

/// The children of a common parent an import runs between: `bpf::loader` importing
/// `bpf::kernel_names::X` runs from `loader` to `kernel_names` under `bpf`. None between a module
/// and its own ancestor (a module uses its parent's items, and a parent its children's, freely).
pub fn siblings(edge: &Edge) -> Option<(ModPath, String, String)> {
    let common = edge
        .from
        .iter()
        .zip(&edge.to)
        .take_while(|(a, b)| a == b)
        .count();
    let from = edge.from.get(common)?;
    let to = edge.to.get(common)?;
    Some((edge.from[..common].to_vec(), from.clone(), to.clone()))
}

/// The circles among the children of each module: sets of two or more children each reaching the
/// others, with for each pair one import that makes it (from, to).
pub fn circles(edges: &BTreeSet<Edge>) -> Vec<(ModPath, Vec<String>, Vec<Edge>)> {
    let mut by_parent: BTreeMap<ModPath, BTreeMap<(String, String), Edge>> = BTreeMap::new();
    for edge in edges {
        if let Some((parent, a, b)) = siblings(edge) {
            by_parent
                .entry(parent)
                .or_default()
                .entry((a, b))
                .or_insert_with(|| edge.clone());
        }
    }
    let mut found = Vec::new();
    for (parent, pairs) in by_parent {
        let graph: BTreeMap<&str, Vec<&str>> =
            pairs.keys().fold(BTreeMap::new(), |mut g, (a, b)| {
                g.entry(a.as_str())
                    .or_insert_with(Vec::new)
                    .push(b.as_str());
                g.entry(b.as_str()).or_insert_with(Vec::new);
                g
            });
        for component in strongly_connected(&graph) {
            let members: BTreeSet<&str> = component.iter().copied().collect();
            let why = pairs
                .iter()
                .filter(|((a, b), _)| members.contains(a.as_str()) && members.contains(b.as_str()))
                .map(|(_, e)| e.clone())
                .collect();
            let names = component.into_iter().map(str::to_owned).collect();
            found.push((parent.clone(), names, why));
        }
    }
    found
}

/// The strongly connected components of two or more nodes (Tarjan), each sorted.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(v: &'a str, graph: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, graph, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort_unstable();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(v, graph, &mut state);
        }
    }
    state.out
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
