//! Prometheus relabeling: an ordered list of rules rewriting a target's labels, or dropping the
//! target. The language every Prometheus, Alloy and Parca user already writes; sonde keeps its
//! semantics and defaults exactly so a rule copied from one of them means the same here:
//! - `source_labels` joined with `separator` (default `;`) give the value a rule looks at; a
//!   missing label is the empty string;
//! - `regex` (default `(.*)`) is fully anchored (`^(?:regex)$`), RE2 syntax;
//! - `replacement` (default `$1`) and, for `replace`, `target_label` expand `$1`, `${1}`, `$name`
//!   and `${name}` (an unknown group is empty, `$$` a dollar);
//! - a label set to the empty string is removed (an empty value and a missing label are one thing).
//!
//! Rules come from `[[relabel]]` in the TOML config or from a YAML file in the Alloy/Parca shape
//! (`parse.rs`); they are checked at start, and a rule that does not parse names its index.

mod parse;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub(crate) use parse::{RelabelError, RuleSpec, parse_yaml};

/// A target's labels, sorted by name.
pub(crate) type Labels = BTreeMap<String, String>;

/// What a rule does (Prometheus's `action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Sets `target_label` to `replacement` expanded with the match of the joined source values.
    Replace,
    /// Drops the target when the joined source values do not match.
    Keep,
    /// Drops the target when the joined source values match.
    Drop,
    /// Drops the target when the joined source values differ from `target_label`'s value.
    KeepEqual,
    /// Drops the target when the joined source values equal `target_label`'s value.
    DropEqual,
    /// Copies every label whose name matches to the name `replacement` expands to.
    LabelMap,
    /// Removes every label whose name matches.
    LabelDrop,
    /// Removes every label whose name does not match.
    LabelKeep,
    /// Sets `target_label` to the MD5 of the joined source values modulo `modulus`.
    HashMod,
    /// Sets `target_label` to the joined source values in lower case.
    Lowercase,
    /// Sets `target_label` to the joined source values in upper case.
    Uppercase,
}

/// One checked rule.
#[derive(Clone, Debug)]
pub(crate) struct Rule {
    action: Action,
    source_labels: Vec<String>,
    separator: String,
    /// Anchored: `^(?:regex)$`.
    regex: regex::Regex,
    /// Whether `regex` is the default `(.*)`: `replace` then needs no match to find the groups.
    regex_default: bool,
    replacement: String,
    target_label: String,
    modulus: u64,
}

/// The rules, in the order they apply.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rules(Vec<Rule>);

impl Rules {
    /// Checks every rule; the first that does not parse is an error naming its index.
    pub(crate) fn compile(specs: &[RuleSpec]) -> Result<Self, RelabelError> {
        specs
            .iter()
            .enumerate()
            .map(|(index, spec)| spec.compile(index))
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    /// The labels after every rule, or `None` when a rule dropped the target. Labels starting
    /// with `__` are left in: the caller keeps its special ones before removing them
    /// ([`strip_internal`]).
    pub(crate) fn apply(&self, mut labels: Labels) -> Option<Labels> {
        for rule in &self.0 {
            if !rule.apply(&mut labels) {
                return None;
            }
        }
        Some(labels)
    }
}

/// Removes the labels starting with `__` (discovery and internal labels), as Prometheus does after
/// relabeling.
pub(crate) fn strip_internal(labels: &mut Labels) {
    labels.retain(|name, _| !name.starts_with("__"));
}

/// Whether `name` is a valid label name (Prometheus's classic rule: `[a-zA-Z_][a-zA-Z0-9_]*`).
pub(crate) fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Sets `name` to `value`, or removes it when `value` is empty.
fn set(labels: &mut Labels, name: &str, value: String) {
    if value.is_empty() {
        labels.remove(name);
    } else {
        labels.insert(name.to_owned(), value);
    }
}

/// Prometheus's `hashmod`: the last 8 bytes of the MD5 digest of `value`, big-endian, modulo
/// `modulus`.
fn hash_mod(value: &str, modulus: u64) -> u64 {
    use md5::Digest as _;
    let digest = md5::Md5::digest(value.as_bytes());
    let mut tail = [0u8; 8];
    tail.copy_from_slice(&digest[8..16]);
    u64::from_be_bytes(tail) % modulus
}

impl Rule {
    /// Applies the rule; false when it drops the target.
    fn apply(&self, labels: &mut Labels) -> bool {
        let value = self
            .source_labels
            .iter()
            .map(|name| labels.get(name).map_or("", String::as_str))
            .collect::<Vec<_>>()
            .join(&self.separator);
        match self.action {
            Action::Keep => return self.regex.is_match(&value),
            Action::Drop => return !self.regex.is_match(&value),
            Action::KeepEqual => {
                return labels.get(&self.target_label).map_or("", String::as_str) == value;
            }
            Action::DropEqual => {
                return labels.get(&self.target_label).map_or("", String::as_str) != value;
            }
            Action::Replace => self.replace(labels, &value),
            Action::Lowercase => set(labels, &self.target_label, value.to_lowercase()),
            Action::Uppercase => set(labels, &self.target_label, value.to_uppercase()),
            Action::HashMod => set(
                labels,
                &self.target_label,
                hash_mod(&value, self.modulus).to_string(),
            ),
            Action::LabelMap => {
                let mapped: Vec<(String, String)> = labels
                    .iter()
                    .filter_map(|(name, v)| {
                        let caps = self.regex.captures(name)?;
                        let mut target = String::new();
                        caps.expand(&self.replacement, &mut target);
                        Some((target, v.clone()))
                    })
                    .collect();
                for (name, v) in mapped {
                    set(labels, &name, v);
                }
            }
            Action::LabelDrop => labels.retain(|name, _| !self.regex.is_match(name)),
            Action::LabelKeep => labels.retain(|name, _| self.regex.is_match(name)),
        }
        true
    }

    fn replace(&self, labels: &mut Labels, value: &str) {
        // The default regex matches anything: a plain replacement needs no captures.
        if self.regex_default && !self.replacement.contains('$') && !self.target_label.contains('$')
        {
            set(labels, &self.target_label, self.replacement.clone());
            return;
        }
        let Some(caps) = self.regex.captures(value) else {
            return;
        };
        let mut target = String::new();
        caps.expand(&self.target_label, &mut target);
        // A template that expands to no valid name (`${3}` without a third group) changes nothing.
        if !valid_label_name(&target) {
            return;
        }
        let mut replaced = String::new();
        caps.expand(&self.replacement, &mut replaced);
        set(labels, &target, replaced);
    }
}
