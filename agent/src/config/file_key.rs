//! Reading `sonde run`'s TOML file, with an error that names the dotted key at fault
//! (`otlp.timeout_secs`), not only a line and column.

use std::path::Path;

use super::{ConfigError, FileConfig};

/// Parses the TOML text, turning serde's error into one that names the dotted key.
pub(super) fn parse_file(path: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|err: toml::de::Error| {
        let key = err
            .span()
            .map(|span| key_at(text, span.start))
            .unwrap_or_default();
        ConfigError::Parse {
            path: path.to_owned(),
            key,
            message: err.message().trim().to_owned(),
        }
    })
}

/// The dotted key on the line containing byte `offset`, prefixed with the enclosing `[table]`.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = text[line_start..line_end].trim();
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.trim_matches(['[', ']']).trim().to_owned());
    if line.starts_with('[') {
        return line.trim_matches(['[', ']']).trim().to_owned();
    }
    let key = line
        .split('=')
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches('"');
    match table {
        Some(t) if !t.is_empty() => format!("{t}.{key}"),
        _ => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_at_finds_table_and_key() {
        let text = "a = 1\n[otlp]\ntimeout_secs = \"x\"\n";
        assert_eq!(
            key_at(text, text.find("\"x\"").unwrap()),
            "otlp.timeout_secs"
        );
        assert_eq!(key_at(text, 0), "a");
    }
}
