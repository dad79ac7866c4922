//! [`Spool`]: the spool directory (`<data-dir>/spool`), its bounds and eviction.
//!
//! Each batch is one file named `<window end, 20 digits>-<batch id>.batch`, so name order is window
//! order and a name says which run made it without opening the file. Files are written through
//! [`SafeDir::write_new`] (temporary name, fsync, rename), so a crash leaves a whole file or only a
//! temporary one, which the next start removes. Bounds: total bytes (`--spool-max-mib`) and, optionally,
//! the age of a window; beyond either, the oldest go first, each counted. A file that fails its checksum
//! is renamed `*.corrupt` (kept for a post-mortem, at most [`MAX_CORRUPT`], within the byte bound).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use super::format::{self, SpooledBatch};
use crate::{
    export::ExportMetrics,
    storage::{SafeDir, StorageError},
};

/// Quarantined files kept; older ones are removed.
const MAX_CORRUPT: usize = 8;
const BATCH_SUFFIX: &str = ".batch";
const CORRUPT_SUFFIX: &str = ".corrupt";

/// The spool's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpoolLimits {
    /// Largest total size of the spool's files, bytes.
    pub max_bytes: u64,
    /// Windows older than this (by window end) are dropped; `None`: no age bound.
    pub max_age: Option<Duration>,
}

/// A spool operation that failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpoolError {
    /// The directory or a file could not be used.
    #[error("spool: {0}")]
    Storage(#[from] StorageError),
    /// One batch is larger than the whole spool.
    #[error(
        "a window of {len} bytes does not fit in a spool of {max} bytes: raise --spool-max-mib"
    )]
    TooLarge {
        /// The encoded batch.
        len: u64,
        /// `--spool-max-mib` in bytes.
        max: u64,
    },
    /// The file failed its checksum or could not be decoded (it has been quarantined).
    #[error("spool file {name} quarantined: {reason}")]
    Corrupt {
        /// The file.
        name: String,
        /// What was wrong.
        reason: String,
    },
}

/// Why a spooled batch left the spool without being delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evicted {
    /// The byte bound.
    Full,
    /// The age bound.
    Expired,
}

/// The spool directory and what it holds.
#[derive(Debug)]
pub(crate) struct Spool {
    dir: SafeDir,
    limits: SpoolLimits,
    /// Every file by name (sorted: window order), with its length.
    files: Mutex<BTreeMap<String, u64>>,
    metrics: Arc<ExportMetrics>,
}

impl Spool {
    /// Opens (creating) the directory `name` under `data_dir` as a spool, removes temporary files a
    /// crash left, and applies the bounds to what earlier runs left (evictions are returned for the
    /// caller to count as losses).
    pub(crate) fn open(
        data_dir: &SafeDir,
        name: &str,
        limits: SpoolLimits,
        metrics: Arc<ExportMetrics>,
    ) -> Result<(Self, Vec<(String, Evicted)>), SpoolError> {
        let dir = data_dir.subdir(name)?;
        let removed = dir.remove_temp_files()?;
        if removed > 0 {
            tracing::info!(removed, dir = %dir.path().display(), "removed temporary spool files left by an earlier run");
        }
        let files = dir
            .entries()?
            .into_iter()
            .filter(|e| {
                e.is_file && (e.name.ends_with(BATCH_SUFFIX) || e.name.ends_with(CORRUPT_SUFFIX))
            })
            .map(|e| (e.name, e.len))
            .collect();
        let spool = Self {
            dir,
            limits,
            files: Mutex::new(files),
            metrics,
        };
        let evicted = spool.enforce(0, crate::clock::unix_nanos_now());
        let (batches, bytes) = spool.publish();
        if batches > 0 {
            tracing::info!(
                batches,
                bytes,
                dir = %spool.dir.path().display(),
                "the spool holds windows of an earlier run; replaying them"
            );
        }
        Ok((spool, evicted))
    }

    /// The directory (for messages).
    pub(crate) fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Writes `batch` as a new file, first dropping the oldest files as the bounds require. Returns the
    /// batches dropped (by name) for the caller to count.
    pub(crate) fn store(&self, batch: &SpooledBatch) -> Result<Vec<(String, Evicted)>, SpoolError> {
        let bytes = format::encode(batch);
        let len = bytes.len() as u64;
        if len > self.limits.max_bytes {
            return Err(SpoolError::TooLarge {
                len,
                max: self.limits.max_bytes,
            });
        }
        let name = file_name(batch.end_unix_nanos, &batch.batch_id);
        let evicted = self.enforce(len, crate::clock::unix_nanos_now());
        let written = self.dir.write_new(&name, &bytes);
        if written.is_ok() {
            self.lock().insert(name, len);
        }
        self.publish();
        written?;
        Ok(evicted)
    }

    /// Drops what the bounds require to make room for `incoming` bytes: windows past the age bound,
    /// then quarantined files beyond [`MAX_CORRUPT`], then the oldest files until the total fits.
    fn enforce(&self, incoming: u64, now_nanos: i64) -> Vec<(String, Evicted)> {
        let mut files = self.lock();
        let mut gone = Vec::new();
        if let Some(age) = self.limits.max_age {
            let cutoff =
                now_nanos.saturating_sub(i64::try_from(age.as_nanos()).unwrap_or(i64::MAX));
            gone.extend(
                files
                    .keys()
                    .filter(|n| n.ends_with(BATCH_SUFFIX) && window_end(n) < cutoff)
                    .map(|n| (n.clone(), Some(Evicted::Expired))),
            );
        }
        let corrupt: Vec<String> = files
            .keys()
            .filter(|n| n.ends_with(CORRUPT_SUFFIX))
            .cloned()
            .collect();
        let extra = corrupt.len().saturating_sub(MAX_CORRUPT);
        gone.extend(corrupt.into_iter().take(extra).map(|n| (n, None)));
        for (name, _) in &gone {
            files.remove(name);
        }
        let mut total: u64 = files.values().sum();
        // Quarantined files go before batches, then batches in window order.
        let mut order: Vec<String> = files
            .keys()
            .filter(|n| n.ends_with(CORRUPT_SUFFIX))
            .chain(files.keys().filter(|n| n.ends_with(BATCH_SUFFIX)))
            .cloned()
            .collect();
        order.reverse();
        while total + incoming > self.limits.max_bytes {
            let Some(name) = order.pop() else { break };
            total -= files.remove(&name).unwrap_or(0);
            let why = name.ends_with(BATCH_SUFFIX).then_some(Evicted::Full);
            gone.push((name, why));
        }
        drop(files);
        let mut evicted = Vec::new();
        for (name, why) in gone {
            if let Err(err) = self.dir.remove(&name) {
                tracing::warn!(error = %err, "could not remove a spool file");
            }
            if let Some(why) = why {
                evicted.push((name, why));
            }
        }
        evicted
    }

    /// The oldest batch's file name.
    pub(crate) fn oldest(&self) -> Option<String> {
        self.lock()
            .keys()
            .find(|n| n.ends_with(BATCH_SUFFIX))
            .cloned()
    }

    /// End of the oldest spooled window, ns since the epoch.
    pub(crate) fn oldest_end(&self) -> Option<i64> {
        self.oldest().map(|n| window_end(&n))
    }

    /// Reads and checks `name`. A file that fails is renamed `*.corrupt`, counted and reported.
    pub(crate) fn load(&self, name: &str) -> Result<SpooledBatch, SpoolError> {
        let read = self
            .dir
            .read(name, self.limits.max_bytes)
            .map_err(|e| e.to_string())
            .and_then(|bytes| format::decode(&bytes).map_err(|e| e.to_string()));
        match read {
            Ok(batch) => Ok(batch),
            Err(reason) => {
                self.quarantine(name);
                Err(SpoolError::Corrupt {
                    name: self.dir.path().join(name).display().to_string(),
                    reason,
                })
            }
        }
    }

    fn quarantine(&self, name: &str) {
        ExportMetrics::add(&self.metrics.spool_quarantined, 1);
        let to = format!("{}{CORRUPT_SUFFIX}", name.trim_end_matches(BATCH_SUFFIX));
        let mut files = self.lock();
        let len = files.remove(name).unwrap_or(0);
        match self.dir.rename(name, &to) {
            Ok(()) => {
                files.insert(to, len);
            }
            Err(err) => {
                // Renaming failed: removing is the only way not to try it again forever.
                tracing::warn!(error = %err, "could not quarantine a spool file; removing it");
                let _ = self.dir.remove(name);
            }
        }
        drop(files);
        self.publish();
    }

    /// Removes a delivered (or rejected) batch.
    pub(crate) fn remove(&self, name: &str) {
        self.lock().remove(name);
        if let Err(err) = self.dir.remove(name) {
            tracing::warn!(error = %err, "could not remove a delivered spool file; it will be sent again");
        }
        self.publish();
    }

    /// Batches in the spool whose id starts with `run` (the run's id in hex).
    pub(crate) fn count_run(&self, run: &str) -> u64 {
        self.lock()
            .keys()
            .filter(|n| n.ends_with(BATCH_SUFFIX) && batch_id(n).starts_with(run))
            .count() as u64
    }

    /// Sets the gauges; returns (batches, bytes).
    fn publish(&self) -> (u64, u64) {
        let files = self.lock();
        let batches = files.keys().filter(|n| n.ends_with(BATCH_SUFFIX)).count() as u64;
        let bytes = files.values().sum();
        drop(files);
        ExportMetrics::set(&self.metrics.spool_batches, batches);
        ExportMetrics::set(&self.metrics.spool_bytes, bytes);
        (batches, bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `<end, 20 digits>-<batch id>.batch`: name order is window order (ends are positive until 2262).
fn file_name(end_unix_nanos: i64, batch_id: &str) -> String {
    format!("{:020}-{batch_id}{BATCH_SUFFIX}", end_unix_nanos.max(0))
}

/// The window end a file name starts with (0 when it does not parse: oldest first).
fn window_end(name: &str) -> i64 {
    name.split('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The batch id inside a file name.
pub(crate) fn batch_id(name: &str) -> &str {
    let base = name
        .strip_suffix(BATCH_SUFFIX)
        .or_else(|| name.strip_suffix(CORRUPT_SUFFIX))
        .unwrap_or(name);
    base.split_once('-').map_or("", |(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::DataMode;

    fn temp() -> SafeDir {
        let path = std::env::temp_dir().join(format!(
            "sonde-spool-unit-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        SafeDir::open_root(&path, DataMode::default()).unwrap()
    }

    fn batch(end: i64, size: usize) -> SpooledBatch {
        SpooledBatch {
            batch_id: format!("00000000000000aa-{end}"),
            start_unix_nanos: end - 1,
            end_unix_nanos: end,
            // Incompressible, so the file size follows `size`.
            requests: vec![(0..size).map(|_| fastrand::u8(..)).collect()],
        }
    }

    #[test]
    fn oldest_go_first_and_the_bound_holds() {
        let root = temp();
        let limits = SpoolLimits {
            max_bytes: 10_000,
            max_age: None,
        };
        let metrics = Arc::new(ExportMetrics::default());
        let (spool, evicted) = Spool::open(&root, "spool", limits, metrics.clone()).unwrap();
        assert!(evicted.is_empty());
        let mut dropped = Vec::new();
        for end in 1..=10 {
            dropped.extend(spool.store(&batch(end, 2_000)).unwrap());
        }
        let on_disk: u64 = spool.dir.entries().unwrap().iter().map(|e| e.len).sum();
        assert!(on_disk <= 10_000, "{on_disk} bytes on disk");
        assert_eq!(ExportMetrics::get(&metrics.spool_bytes), on_disk);
        let kept = ExportMetrics::get(&metrics.spool_batches);
        assert_eq!(kept + dropped.len() as u64, 10);
        assert!(dropped.iter().all(|(_, why)| *why == Evicted::Full));
        // The oldest were dropped: what is left is the newest, in order.
        assert_eq!(window_end(&spool.oldest().unwrap()), 11 - kept as i64);
        assert!(matches!(
            spool.store(&batch(99, 20_000)),
            Err(SpoolError::TooLarge { .. })
        ));
        // A restart sees the same files.
        let (again, _) = Spool::open(&root, "spool", limits, metrics).unwrap();
        assert_eq!(again.oldest(), spool.oldest());
        assert_eq!(again.count_run("00000000000000aa"), kept);
        let _ = std::fs::remove_dir_all(root.path());
    }

    #[test]
    fn a_damaged_file_is_quarantined_and_counted() {
        let root = temp();
        let limits = SpoolLimits {
            max_bytes: 1 << 20,
            max_age: Some(Duration::from_secs(3600)),
        };
        let metrics = Arc::new(ExportMetrics::default());
        let (spool, _) = Spool::open(&root, "spool", limits, metrics.clone()).unwrap();
        let now = crate::clock::unix_nanos_now();
        spool.store(&batch(now, 100)).unwrap();
        let name = spool.oldest().unwrap();
        let mut bytes = spool.dir.read(&name, 1 << 20).unwrap();
        bytes[20] ^= 1;
        spool.dir.remove(&name).unwrap();
        spool.dir.write_new(&name, &bytes).unwrap();
        assert!(matches!(spool.load(&name), Err(SpoolError::Corrupt { .. })));
        assert_eq!(ExportMetrics::get(&metrics.spool_quarantined), 1);
        assert_eq!(spool.oldest(), None);
        assert!(
            spool
                .dir
                .exists(&name.replace(".batch", ".corrupt"))
                .unwrap()
        );
        // The age bound: a window an hour and a bit old is dropped at the next store.
        spool.store(&batch(now - 3_700_000_000_000, 100)).unwrap();
        let evicted = spool.store(&batch(now, 100)).unwrap();
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0].1, Evicted::Expired);
        let _ = std::fs::remove_dir_all(root.path());
    }
}
