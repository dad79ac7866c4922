//! The local data directory's layout and its index (`index.jsonl`, one JSON line per profile file):
//! written by the local sink (`export/local.rs`), rewritten by retention, read by `/metrics` and by
//! `sonde diff --data`. One definition of the format for all of them.

use std::path::{Component, Path};

use crate::{metadata::Tags, profile::model::ProfileKind};

/// Name of the index file inside the data directory.
pub const INDEX_FILE: &str = "index.jsonl";
/// Directory of the profile files inside the data directory.
pub(crate) const PROFILES_DIR: &str = "profiles";

/// One line of `index.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexEntry {
    /// Path of the gzip pprof, relative to the data directory, `/`-separated.
    pub path: String,
    /// What the profile measures (`cpu` or `offcpu`).
    pub kind: ProfileKind,
    /// Window start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: i64,
    /// Window end, nanoseconds since the Unix epoch.
    pub end_unix_nanos: i64,
    /// The workload's tags.
    #[serde(default)]
    pub tags: Tags,
}

/// Directory of the hourly tier (retention merges windows into it; windows are under `profiles/`).
pub(crate) const HOURLY_DIR: &str = "hourly";

impl IndexEntry {
    /// Parses one index line; its path must name a file inside the data directory (no `..`, not
    /// absolute), since `sonde diff` opens it.
    pub fn parse_line(line: &str) -> Result<Self, String> {
        let entry: IndexEntry = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let inside = Path::new(&entry.path)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside || entry.path.is_empty() {
            return Err(format!(
                "path {:?} is not a file inside the data directory",
                entry.path
            ));
        }
        Ok(entry)
    }
}
