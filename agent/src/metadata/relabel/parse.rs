//! Rules as written (`[[relabel]]` in TOML, or a YAML file) and their checks, which are
//! Prometheus's: a rule Prometheus refuses is refused here, with the rule's index and the reason.

use super::{Action, Rule, valid_label_name};

/// Prometheus's defaults.
const DEFAULT_SEPARATOR: &str = ";";
const DEFAULT_REGEX: &str = "(.*)";
const DEFAULT_REPLACEMENT: &str = "$1";

/// A rule that does not parse, or a rules file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RelabelError {
    /// A rule breaks one of the checks.
    #[error("relabel rule {index}: {reason}")]
    Rule {
        /// Its position in the list, from 0.
        index: usize,
        /// What to fix.
        reason: String,
    },
    /// The YAML file is not a list of rules.
    #[error(
        "invalid relabel rules file: {message}; expected a list of rules, or `relabel_configs:` holding one"
    )]
    Yaml {
        /// What the parser said.
        message: String,
    },
}

/// One rule as written; every field optional, with Prometheus's default.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleSpec {
    #[serde(default)]
    source_labels: Vec<String>,
    separator: Option<String>,
    regex: Option<String>,
    modulus: Option<u64>,
    target_label: Option<String>,
    replacement: Option<String>,
    action: Option<String>,
}

/// The YAML file: Parca Agent's `relabel_configs:` key, or the list alone.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum YamlFile {
    Wrapped { relabel_configs: Vec<RuleSpec> },
    List(Vec<RuleSpec>),
}

/// The rules of a YAML file in the Alloy/Parca (Prometheus `relabel_configs`) shape.
pub(crate) fn parse_yaml(text: &str) -> Result<Vec<RuleSpec>, RelabelError> {
    match serde_saphyr::from_str::<YamlFile>(text) {
        Ok(YamlFile::Wrapped { relabel_configs }) => Ok(relabel_configs),
        Ok(YamlFile::List(rules)) => Ok(rules),
        Err(err) => Err(RelabelError::Yaml {
            message: err.to_string(),
        }),
    }
}

fn action(name: &str) -> Option<Action> {
    Some(match name.to_ascii_lowercase().as_str() {
        "replace" => Action::Replace,
        "keep" => Action::Keep,
        "drop" => Action::Drop,
        "keepequal" => Action::KeepEqual,
        "dropequal" => Action::DropEqual,
        "labelmap" => Action::LabelMap,
        "labeldrop" => Action::LabelDrop,
        "labelkeep" => Action::LabelKeep,
        "hashmod" => Action::HashMod,
        "lowercase" => Action::Lowercase,
        "uppercase" => Action::Uppercase,
        _ => return None,
    })
}

/// A target label or a labelmap replacement: a label name in which `$1`/`${name}` may stand
/// for parts (Prometheus's `relabelTarget`).
fn valid_template(text: &str) -> bool {
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('$') {
            let len = if let Some(inner) = after.strip_prefix('{') {
                match inner.find('}') {
                    Some(end) if end > 0 && inner[..end].chars().all(is_word) => end + 2,
                    _ => return false,
                }
            } else {
                let n = after.chars().take_while(|c| is_word(*c)).count();
                if n == 0 {
                    return false;
                }
                n
            };
            rest = &after[len..];
        } else {
            let c = rest.chars().next().unwrap_or('-');
            if !is_word(c) {
                return false;
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    // Without templates the name must not start with a digit.
    text.starts_with('$') || valid_label_name(text.split('$').next().unwrap_or(""))
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl RuleSpec {
    /// Checks the rule (Prometheus's `Config.Validate`) and compiles its regex.
    pub(super) fn compile(&self, index: usize) -> Result<Rule, RelabelError> {
        let fail = |reason: String| RelabelError::Rule { index, reason };
        let action_text = self.action.as_deref().unwrap_or("replace");
        let action = action(action_text).ok_or_else(|| {
            fail(format!(
                "unknown action {action_text:?}; expected replace, keep, drop, keepequal, dropequal, \
                 labelmap, labeldrop, labelkeep, hashmod, lowercase or uppercase"
            ))
        })?;
        let regex_text = self.regex.as_deref().unwrap_or(DEFAULT_REGEX);
        let regex = regex::Regex::new(&format!("^(?:{regex_text})$"))
            .map_err(|err| fail(format!("invalid regex {regex_text:?}: {err}")))?;
        let target = self.target_label.clone().unwrap_or_default();
        let modulus = self.modulus.unwrap_or(0);
        let name = action_text.to_ascii_lowercase();
        let needs_target = matches!(
            action,
            Action::Replace
                | Action::HashMod
                | Action::Lowercase
                | Action::Uppercase
                | Action::KeepEqual
                | Action::DropEqual
        );
        if needs_target && target.is_empty() {
            return Err(fail(format!("action {name} needs a `target_label`")));
        }
        if action == Action::HashMod && modulus == 0 {
            return Err(fail("action hashmod needs a non-zero `modulus`".into()));
        }
        if action == Action::Replace && !valid_template(&target) {
            return Err(fail(format!(
                "{target:?} is not a valid `target_label` (a label name, `$1`/`${{name}}` allowed)"
            )));
        }
        if matches!(
            action,
            Action::HashMod
                | Action::Lowercase
                | Action::Uppercase
                | Action::KeepEqual
                | Action::DropEqual
        ) && !valid_label_name(&target)
        {
            return Err(fail(format!(
                "{target:?} is not a valid `target_label` for action {name} (a label name)"
            )));
        }
        let replacement = self
            .replacement
            .clone()
            .unwrap_or_else(|| DEFAULT_REPLACEMENT.into());
        if action == Action::LabelMap && !valid_template(&replacement) {
            return Err(fail(format!(
                "{replacement:?} is not a valid `replacement` for action labelmap (a label name, `$1` allowed)"
            )));
        }
        let separator = self
            .separator
            .clone()
            .unwrap_or_else(|| DEFAULT_SEPARATOR.into());
        let only_regex = matches!(action, Action::LabelDrop | Action::LabelKeep);
        if only_regex
            && (!self.source_labels.is_empty()
                || !target.is_empty()
                || modulus != 0
                || separator != DEFAULT_SEPARATOR
                || replacement != DEFAULT_REPLACEMENT)
        {
            return Err(fail(format!(
                "action {name} takes only a `regex`, no other field"
            )));
        }
        let only_sources = matches!(action, Action::KeepEqual | Action::DropEqual);
        if only_sources
            && (regex_text != DEFAULT_REGEX
                || modulus != 0
                || separator != DEFAULT_SEPARATOR
                || replacement != DEFAULT_REPLACEMENT)
        {
            return Err(fail(format!(
                "action {name} takes only `source_labels` and `target_label`, no other field"
            )));
        }
        Ok(Rule {
            action,
            source_labels: self.source_labels.clone(),
            separator,
            regex,
            regex_default: regex_text == DEFAULT_REGEX,
            replacement,
            target_label: target,
            modulus,
        })
    }
}
