//! What a Rust source file imports from its own crate, read from its text: `use` trees and paths
//! written inline (`crate::a::b`, `super::c`), with comments, string literals and `#[cfg(test)]` items
//! left out. Not a Rust parser: enough of one for the code of this workspace, whose imports it must
//! see all of (a missed import would let a circle back in, so the tests check the known shapes).

/// The text of `src` with comments, string and character literals blanked and every
/// `#[cfg(test)]` item removed.
pub fn code_of(src: &str) -> String {
    let bytes = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, i);
            while j < bytes.len() {
                if src[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if src[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            i = j;
            out.push(' ');
        } else if let Some(len) = raw_string_len(rest) {
            out.push_str("\"\"");
            i += len;
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = j + 1;
        } else if let Some(len) = char_literal_len(rest) {
            out.push_str("' '");
            i += len;
        } else {
            let c = rest.chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    without_test_items(&out)
}

/// The child modules `code` declares as test-only (`#[cfg(test)] mod live;`): their files are tests.
pub fn test_modules(code: &str) -> Vec<String> {
    const MARK: &str = "#[cfg(test)]";
    code.match_indices(MARK)
        .filter_map(|(at, _)| {
            let item = code[at + MARK.len()..].trim_start();
            let item = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|vis| item.strip_prefix(vis))
                .unwrap_or(item);
            let name = item.strip_prefix("mod ")?.split(';').next()?.trim();
            let valid = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
            valid.then(|| name.to_owned())
        })
        .collect()
}

/// The length of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting `s`, if one does.
fn raw_string_len(s: &str) -> Option<usize> {
    let start = s.strip_prefix('b').unwrap_or(s);
    let prefix = s.len() - start.len();
    let after_r = start.strip_prefix('r')?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    let body = after_r[hashes..].strip_prefix('"')?;
    let end = format!("\"{}", "#".repeat(hashes));
    let close = body.find(&end)?;
    Some(prefix + 1 + hashes + 1 + close + end.len())
}

/// The length of a character literal starting `s` (`'a'`, `'\n'`, `'\u{1F600}'`), not a lifetime.
fn char_literal_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix('\'')?;
    if let Some(escaped) = body.strip_prefix('\\') {
        let close = escaped.find('\'')?;
        return (close <= 10).then_some(close + 3);
    }
    let c = body.chars().next()?;
    body[c.len_utf8()..]
        .starts_with('\'')
        .then_some(c.len_utf8() + 2)
}

/// `code` without the items that follow `#[cfg(test)]` (up to their `;` or their closing brace).
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The paths a file's code names.
#[derive(Default)]
pub struct Paths {
    /// Each `use` tree expanded to its leaves (`use a::{b, c::d}` gives `a::b` and `a::c::d`;
    /// `self` leaves name their prefix), as segments.
    pub uses: Vec<Vec<String>>,
    /// The name each use binds, in the order of `uses` (the last segment, or the rename of
    /// `a::b as c`).
    pub names: Vec<String>,
    /// Each `crate::`/`super::`/`self::` path written in the code.
    pub inline: Vec<Vec<String>>,
}

/// Every path the code names that may start in its own crate or module.
pub fn paths_of(code: &str) -> Paths {
    let mut named = Vec::new();
    for tree in use_trees(code) {
        expand("", &tree, &mut named);
    }
    named.retain(|(p, _)| !p.is_empty());
    let (uses, names) = named.into_iter().unzip();
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = at.checked_sub(1).map(|i| bytes[i]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            paths.push(segments(&code[at..end]));
        }
    }
    // `crate::{…}` of a use tree is seen here as `crate` alone: the tree itself counts above.
    paths.retain(|p| p.len() > 1);
    Paths {
        uses,
        names,
        inline: paths,
    }
}

/// The trees of every `use` declaration (`pub(crate) use a::{b, c};` gives `a::{b, c}`).
fn use_trees(code: &str) -> Vec<String> {
    let mut trees = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        from = at + 4;
        let before = at.checked_sub(1).map(|i| bytes[i]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        if let Some(end) = code[from..].find(';') {
            // Whitespace goes, a rename's `as` becomes `@` (`a::b as c` gives `a::b@c`).
            let tree: String = code[from..from + end]
                .split_whitespace()
                .map(|t| if t == "as" { "@" } else { t })
                .collect();
            trees.push(tree);
            from += end;
        }
    }
    trees
}

/// Appends the leaves of `tree` under `prefix` to `out`, each with the name it binds.
fn expand(prefix: &str, tree: &str, out: &mut Vec<(Vec<String>, String)>) {
    let Some(open) = tree.find('{') else {
        let (leaf, rename) = match tree.split_once('@') {
            Some((leaf, rename)) => (leaf, Some(rename)),
            None => (tree, None),
        };
        let mut path = segments(&format!("{prefix}{leaf}"));
        if path.last().is_some_and(|s| s == "self" || s == "*") && path.len() > 1 {
            path.pop();
        }
        let name = rename.map(str::to_owned).or_else(|| path.last().cloned());
        out.push((path, name.unwrap_or_default()));
        return;
    };
    let inner_prefix = format!("{prefix}{}", &tree[..open]);
    let close = tree.rfind('}').unwrap_or(tree.len());
    let body = &tree[open + 1..close];
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                if !body[start..i].is_empty() {
                    expand(&inner_prefix, &body[start..i], out);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if !body[start..].is_empty() {
        expand(&inner_prefix, &body[start..], out);
    }
}

/// `a::b::c` as segments.
fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(code: &str) -> Vec<String> {
        let paths = paths_of(&code_of(code));
        let mut all: Vec<String> = paths
            .uses
            .into_iter()
            .chain(paths.inline)
            .map(|p| p.join("::"))
            .collect();
        all.sort();
        all.dedup();
        all
    }

    #[test]
    fn use_trees_expand_to_their_leaves_and_inline_paths_count() {
        let src = r#"
            //! crate::docs::are_not_imports
            use std::sync::Arc;
            pub(crate) use crate::{bpf::{self, loader::Loaded}, process::Mapping};
            use super::{Foo, bar::*};
            use crate::renamed::Thing as Other;
            /* crate::in_a_comment */
            fn f() { let s = "crate::in_a_string"; let c = '"'; crate::unwind::mappings::bias(); }
            #[cfg(test)]
            mod tests { use crate::only_tests::X; }
            #[cfg(test)]
            use crate::test_only_use;
            fn g<'a>(x: &'a str) -> &'a str { super::baz::qux(x) }
        "#;
        assert_eq!(
            joined(src),
            [
                "crate::bpf",
                "crate::bpf::loader::Loaded",
                "crate::process::Mapping",
                "crate::renamed::Thing",
                "crate::unwind::mappings::bias",
                "std::sync::Arc",
                "super::Foo",
                "super::bar",
                "super::baz::qux",
            ]
        );
    }

    #[test]
    fn raw_strings_and_nested_comments_hide_what_they_hold() {
        let src = "let a = r#\"use crate::x;\"#; /* a /* b */ use crate::y; */ use crate::z;";
        assert_eq!(joined(src), ["crate::z"]);
    }
}
