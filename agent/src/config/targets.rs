//! The relabel rules of `sonde run`: `[[relabel]]` tables in the TOML file, or a YAML file in the
//! Alloy/Parca shape named by `--relabel-file` (key `relabel_file`). Checked at start: a rule that
//! does not parse stops the start with its index and the reason.

use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::metadata::relabel::{RuleSpec, Rules, parse_yaml};

/// Compiles the file's `[[relabel]]` rules or those of the YAML file (one source: both is an error,
/// as their order would be a guess).
pub(super) fn resolve(
    flag: Option<&Path>,
    file_key: Option<PathBuf>,
    toml_rules: &[RuleSpec],
) -> Result<Rules, ConfigError> {
    let path = flag.map(Path::to_owned).or(file_key);
    let specs = match path {
        Some(path) if !toml_rules.is_empty() => {
            return Err(super::invalid(
                "relabel_file",
                &path.display().to_string(),
                "the config file has [[relabel]] rules too: keep the rules in one place",
            ));
        }
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
            parse_yaml(&text).map_err(|e| {
                super::invalid("relabel_file", &path.display().to_string(), &e.to_string())
            })?
        }
        None => toml_rules.to_vec(),
    };
    Rules::compile(&specs).map_err(|e| super::invalid("relabel", "", &e.to_string()))
}
