//! [`LocalDirSink`]: the embedded default without an OTLP endpoint. Each window's profiles become one
//! pack (`crate::datadir`: their pprof messages, tags as `key=value` comments, gzip'd as one stream)
//! under `<DIR>/profiles/<window start, unix seconds>/`, and one line each in `<DIR>/index.jsonl`.
//!
//! CONTRACT (read by `sonde diff`, keep exactly): `index.jsonl` holds one JSON object per line,
//! `{"path": <path relative to DIR>, "offset": u64, "length": u64, "kind": "cpu"|"offcpu",
//! "start_unix_nanos": i64, "end_unix_nanos": i64, "tags": {"service.name": ..., ...}}`, appended only
//! after the file is fully written and renamed into place.
//!
//! Crash safety: a window's pack is written under a temporary name and renamed, then made durable
//! (`syncfs`); its index lines follow on an `O_APPEND` descriptor, cut back when a write fails (disk
//! full), so a reader sees whole lines and only files that are on disk. A crash before
//! the lines leaves at worst a file without lines, or a torn last line, which [`LocalDirSink::open`]
//! repairs at the next start, with the temporary files.

use std::{
    path::Path,
    sync::{Arc, Mutex, atomic::Ordering},
};

use super::{Batch, ExportError, ExportMetrics, ExportOutcome, Sink};
pub use crate::datadir::{INDEX_FILE, IndexEntry};
use crate::{
    datadir::{PACK_EXT, PROFILES_DIR, Pack},
    profile::pprof,
    retention::{Policy, Retention},
    storage::{DataMode, Durability, SafeDir, StorageError},
};

/// The tail of the index read to find a torn last line; far longer than any line.
const TAIL_BYTES: u64 = 1 << 20;

/// What [`LocalDirSink::open`] repaired after an unclean stop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repairs {
    /// Bytes of a torn last index line cut off.
    pub torn_index_bytes: u64,
    /// Temporary files of interrupted writes removed.
    pub temp_files: u64,
}

/// Writes windows into a local directory.
#[derive(Clone, Debug)]
pub struct LocalDirSink {
    root: SafeDir,
    profiles: SafeDir,
    repairs: Repairs,
    /// The daemon's tiers, applied after each window is written (serialised with the writes).
    retention: Option<Arc<Mutex<Retention>>>,
    metrics: Option<Arc<ExportMetrics>>,
}

impl LocalDirSink {
    /// Opens (creating) the data directory at `dir` with `mode`, refusing a symlinked, foreign or
    /// group/other-writable one, and repairs what an unclean stop left.
    pub fn open(dir: &Path, mode: DataMode) -> Result<Self, StorageError> {
        Self::in_dir(SafeDir::open_root(dir, mode)?)
    }

    /// The sink inside an already opened data directory.
    pub(crate) fn in_dir(root: SafeDir) -> Result<Self, StorageError> {
        let profiles = root.subdir(PROFILES_DIR)?;
        let mut repairs = Repairs {
            torn_index_bytes: repair_index(&root)?,
            temp_files: root.remove_temp_files()? as u64,
        };
        repairs.temp_files += profiles.remove_temp_files()? as u64;
        for window in profiles.entries()?.into_iter().filter(|e| e.is_dir) {
            repairs.temp_files += profiles.subdir(&window.name)?.remove_temp_files()? as u64;
        }
        if repairs != Repairs::default() {
            tracing::warn!(
                dir = %root.path().display(),
                torn_index_bytes = repairs.torn_index_bytes,
                temp_files = repairs.temp_files,
                "repaired the data directory after an unclean stop"
            );
        }
        Ok(Self {
            root,
            profiles,
            repairs,
            retention: None,
            metrics: None,
        })
    }

    /// Counts repairs and retention in the export counters (the one registry publishes them).
    pub(crate) fn with_metrics(mut self, metrics: Arc<ExportMetrics>) -> Self {
        let add = |c: &std::sync::atomic::AtomicU64, v: u64| c.fetch_add(v, Ordering::Relaxed);
        add(
            &metrics.local_repaired_torn_index,
            u64::from(self.repairs.torn_index_bytes > 0),
        );
        add(&metrics.local_repaired_temp_files, self.repairs.temp_files);
        self.metrics = Some(metrics);
        self
    }

    /// Applies `policy` after every window.
    pub(crate) fn with_retention(mut self, policy: Policy) -> Self {
        self.retention = Some(Arc::new(Mutex::new(Retention::new(policy))));
        self
    }

    fn apply_retention(&self, added: u64) {
        let Some(retention) = &self.retention else {
            return;
        };
        let now = crate::clock::unix_nanos_now();
        let mut retention = retention.lock().expect("retention lock");
        let outcome = retention.after_write(&self.root, added, now);
        if let (Ok(Some(o)), Some(m)) = (&outcome, &self.metrics) {
            m.retention_merged
                .fetch_add(o.windows_merged, Ordering::Relaxed);
            m.retention_expired.fetch_add(o.expired, Ordering::Relaxed);
            m.retention_capped.fetch_add(o.capped, Ordering::Relaxed);
            m.retention_orphans.fetch_add(o.orphans, Ordering::Relaxed);
        }
        match outcome {
            Ok(None) => {}
            Ok(Some(o)) => {
                // WARN when the cap deleted profiles or the pass found damage; INFO otherwise.
                macro_rules! pass {
                    ($level:ident) => {
                        tracing::$level!(
                            windows_merged = o.windows_merged,
                            hourly_written = o.hourly_written,
                            expired = o.expired,
                            capped = o.capped,
                            capped_bytes = o.capped_bytes,
                            lines_dropped = o.lines_dropped,
                            orphans = o.orphans,
                            merge_failures = o.merge_failures,
                            bytes = o.bytes_after,
                            "retention pass"
                        )
                    };
                }
                if o.capped > 0 || o.lines_dropped > 0 || o.merge_failures > 0 {
                    pass!(warn);
                } else {
                    pass!(info);
                }
            }
            Err(err) => {
                tracing::warn!(%err, "retention pass failed; it is tried again next window")
            }
        }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        self.root.path()
    }

    /// What opening repaired.
    pub fn repairs(&self) -> Repairs {
        self.repairs
    }

    /// Writes a window's pack, makes it durable, then appends its index lines. When the sync or the
    /// lines fail, the pack goes too, so the directory never holds a profile `sonde diff` cannot
    /// find, nor a line whose file may not be on disk.
    fn write_window(&self, window: &str, pack: Pack) -> Result<ExportOutcome, ExportError> {
        if pack.is_empty() {
            return Ok(ExportOutcome::default());
        }
        let dir = self.profiles.subdir(window)?;
        let (bytes, entries) = pack.finish();
        let name = dir.write_unique("window", PACK_EXT, &bytes, Durability::Batch)?;
        let entries = entries(&format!("{PROFILES_DIR}/{window}/{name}"));
        let mut lines = String::new();
        for entry in &entries {
            lines.push_str(&serde_json::to_string(entry).expect("index entries always serialize"));
            lines.push('\n');
        }
        let result = dir
            .sync_filesystem()
            .and_then(|()| self.root.append(INDEX_FILE, lines.as_bytes()));
        if let Err(e) = result {
            let _ = dir.remove(&name);
            return Err(e.into());
        }
        Ok(ExportOutcome {
            requests: 1,
            bytes: bytes.len() as u64,
            ..ExportOutcome::default()
        })
    }
}

/// Cuts a torn last line (no newline: a write cut short by a crash) off the index; returns the bytes cut.
fn repair_index(root: &SafeDir) -> Result<u64, StorageError> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    if !root.exists(INDEX_FILE)? {
        return Ok(0);
    }
    let mut file = root.open_read(INDEX_FILE)?;
    let io = |source| StorageError::Io {
        path: root.path().join(INDEX_FILE),
        source,
    };
    let len = file.metadata().map_err(io)?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).map_err(io)?;
    if tail.last().is_none_or(|&b| b == b'\n') {
        return Ok(0);
    }
    let keep = match tail.iter().rposition(|&b| b == b'\n') {
        Some(i) => start + i as u64 + 1,
        // No newline in the last MiB: a line cannot be that long, so it all goes.
        None => start,
    };
    root.truncate(INDEX_FILE, keep)?;
    Ok(len - keep)
}

#[async_trait::async_trait]
impl Sink for LocalDirSink {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn export(&self, batch: &Batch) -> Result<ExportOutcome, ExportError> {
        let window = batch.start_unix_nanos.div_euclid(1_000_000_000).to_string();
        let mut pack = Pack::default();
        for (tags, profile) in &batch.profiles {
            let entry = IndexEntry {
                // The pack's path, once written.
                path: String::new(),
                offset: None,
                length: None,
                kind: profile.kind,
                start_unix_nanos: batch.start_unix_nanos,
                end_unix_nanos: batch.end_unix_nanos,
                tags: tags.clone(),
            };
            pack.push(&pprof::encode_tagged(profile, tags.iter()), entry);
        }
        let sink = self.clone();
        let write = tokio::task::spawn_blocking(move || {
            let outcome = sink.write_window(&window, pack)?;
            sink.apply_retention(outcome.bytes);
            Ok(outcome)
        });
        write.await.unwrap_or_else(|join| {
            Err(ExportError::Io {
                path: self.dir().to_owned(),
                source: std::io::Error::other(join.to_string()),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_index_tail_and_temp_files_are_repaired_at_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        drop(LocalDirSink::open(&dir, DataMode::default()).unwrap());
        let whole = "{\"path\":\"profiles/1/a.pb.gz\"}\n";
        std::fs::write(dir.join(INDEX_FILE), format!("{whole}{{\"path\":\"prof")).unwrap();
        std::fs::create_dir(dir.join("profiles/1")).unwrap();
        std::fs::write(dir.join("profiles/1/.a.pb.gz.9-1.tmp"), b"half").unwrap();
        std::fs::write(dir.join(".index.jsonl.tmp"), b"x").unwrap();
        let sink = LocalDirSink::open(&dir, DataMode::default()).unwrap();
        assert_eq!(
            sink.repairs(),
            Repairs {
                torn_index_bytes: 13,
                temp_files: 2
            }
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(INDEX_FILE)).unwrap(),
            whole
        );
        let again = LocalDirSink::open(&dir, DataMode::default()).unwrap();
        assert_eq!(again.repairs(), Repairs::default());
    }
}
