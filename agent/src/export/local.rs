//! [`LocalDirSink`]: the embedded default without an OTLP endpoint. Each profile of a window becomes one gzip
//! pprof file under `<DIR>/profiles/<window start, unix seconds>/`, with the tags as `key=value` comments, and
//! one line in `<DIR>/index.jsonl`.
//!
//! CONTRACT (read by `sonde diff`, keep exactly): `index.jsonl` holds one JSON object per line,
//! `{"path": <path relative to DIR>, "kind": "cpu"|"offcpu", "start_unix_nanos": i64, "end_unix_nanos": i64,
//! "tags": {"service.name": ..., ...}}`, appended only after the file is fully written and renamed into place.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use super::{Batch, ExportError, ExportOutcome, Sink};
use crate::{metadata::Tags, profile::pprof};

/// Name of the index file inside the data directory.
pub const INDEX_FILE: &str = "index.jsonl";

/// One line of `index.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexEntry {
    /// Path of the gzip pprof, relative to the data directory, `/`-separated.
    pub path: String,
    /// `cpu` or `offcpu`.
    pub kind: String,
    /// Window start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: i64,
    /// Window end, nanoseconds since the Unix epoch.
    pub end_unix_nanos: i64,
    /// The workload's tags.
    pub tags: Tags,
}

/// Writes windows into a local directory.
#[derive(Clone, Debug)]
pub struct LocalDirSink {
    dir: PathBuf,
}

impl LocalDirSink {
    /// A sink writing under `dir` (created on first export).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// A file name part made of `[A-Za-z0-9._-]` only.
fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if out.is_empty() {
        "unknown".to_owned()
    } else {
        out
    }
}

/// FNV-1a over the tags: a short name part that is stable across runs and Rust versions.
fn tags_hash(tags: &Tags) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for (k, v) in tags.iter() {
        for b in k.bytes().chain([0]).chain(v.bytes()).chain([0]) {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Writes `bytes` to `dir/rel` through a temporary file and a rename, then appends `entry` to the index.
/// Never overwrites: a name already taken (a second window in the same second) gets a `-N` suffix.
fn write_one(dir: &Path, bytes: &[u8], entry: &mut IndexEntry) -> Result<(), ExportError> {
    let stem = entry.path.trim_end_matches(".pb.gz").to_owned();
    let mut n = 1;
    while dir.join(&entry.path).exists() {
        entry.path = format!("{stem}-{n}.pb.gz");
        n += 1;
    }
    let path = dir.join(&entry.path);
    let parent = path.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let tmp = parent.join(format!(
        ".{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let mut file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(bytes).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;

    let index = dir.join(INDEX_FILE);
    let mut line = serde_json::to_string(entry).expect("index entries always serialize");
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&index)
        .map_err(io(&index))?;
    // One write of the whole line: concurrent readers never see half a record.
    file.write_all(line.as_bytes()).map_err(io(&index))?;
    Ok(())
}

#[async_trait::async_trait]
impl Sink for LocalDirSink {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        let window = batch.start_unix_nanos.div_euclid(1_000_000_000);
        let mut files = Vec::with_capacity(batch.profiles.len());
        for (tags, profile) in &batch.profiles {
            let kind = profile.kind.name();
            let service = tags
                .get(crate::metadata::keys::SERVICE_NAME)
                .unwrap_or("unknown");
            let path = format!(
                "profiles/{window}/{kind}-{}-{:08x}.pb.gz",
                sanitize(service),
                tags_hash(tags)
            );
            let bytes = pprof::encode_gzip_tagged(profile, tags.iter());
            let entry = IndexEntry {
                path,
                kind: kind.to_owned(),
                start_unix_nanos: batch.start_unix_nanos,
                end_unix_nanos: batch.end_unix_nanos,
                tags: tags.clone(),
            };
            files.push((bytes, entry));
        }
        let dir = self.dir.clone();
        let write = tokio::task::spawn_blocking(move || {
            let mut files = files;
            let mut outcome = ExportOutcome::default();
            for (bytes, entry) in &mut files {
                write_one(&dir, bytes, entry)?;
                outcome.requests += 1;
                outcome.bytes += bytes.len() as u64;
            }
            Ok(outcome)
        });
        write.await.unwrap_or_else(|join| {
            Err(ExportError::Io {
                path: self.dir.clone(),
                source: std::io::Error::other(join.to_string()),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_stable() {
        assert_eq!(sanitize("shop/cart api"), "shop_cart_api");
        assert_eq!(sanitize(""), "unknown");
        let tags: Tags = [("service.name", "cart")].into_iter().collect();
        assert_eq!(tags_hash(&tags), tags_hash(&tags.clone()));
        let other: Tags = [("service.name", "carts")].into_iter().collect();
        assert_ne!(tags_hash(&tags), tags_hash(&other));
    }
}
