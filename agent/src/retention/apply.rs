//! Carries out a retention pass on the data directory: merge, expire, cap, rewrite the index, delete.

use std::{
    collections::{HashMap, HashSet},
    io::Read as _,
};

use flate2::read::GzDecoder;
use prost::Message as _;

use super::{Policy, RetentionError, merge::Merger, plan};
use crate::{
    datadir::{HOURLY_DIR, INDEX_FILE, IndexEntry, PROFILES_DIR},
    profile::pprof::proto,
    storage::{Durability, SafeDir, StorageError},
};

/// The index and a profile are read up to this; far above what sonde writes.
const MAX_READ: u64 = 1 << 30;

/// What a pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Windows merged into hourly profiles (their files deleted).
    pub(crate) windows_merged: u64,
    /// Hourly profiles written.
    pub(crate) hourly_written: u64,
    /// Hourly profiles past their tier, deleted.
    pub(crate) expired: u64,
    /// Profiles the byte cap deleted, and their bytes.
    pub(crate) capped: u64,
    pub(crate) capped_bytes: u64,
    /// Index lines dropped: not an entry, or their file was gone.
    pub(crate) lines_dropped: u64,
    /// Profile files that no index line named (a crash between the two writes), deleted.
    pub(crate) orphans: u64,
    /// Merges that failed (an unreadable member); their windows stay.
    pub(crate) merge_failures: u64,
    /// Bytes of the profiles left.
    pub(crate) bytes_after: u64,
    /// When the next pass can change something (Unix nanoseconds).
    pub(crate) next_due_nanos: i64,
}

/// The daemon's retention: runs a pass when one is due or the cap is passed.
#[derive(Debug)]
pub(crate) struct Retention {
    policy: Policy,
    next_due_nanos: i64,
    bytes: u64,
}

impl Retention {
    /// Due at once: the first window runs a pass (and sweeps what an unclean stop left).
    pub(crate) fn new(policy: Policy) -> Self {
        Self {
            policy,
            next_due_nanos: i64::MIN,
            bytes: 0,
        }
    }

    /// After a window of `added` bytes was written at `now`: a pass, when one can change something.
    pub(crate) fn after_write(
        &mut self,
        root: &SafeDir,
        added: u64,
        now: i64,
    ) -> Result<Option<Outcome>, RetentionError> {
        self.bytes = self.bytes.saturating_add(added);
        if now < self.next_due_nanos && self.bytes <= self.policy.max_bytes {
            return Ok(None);
        }
        let outcome = pass(root, &self.policy, now)?;
        self.next_due_nanos = outcome.next_due_nanos;
        self.bytes = outcome.bytes_after;
        Ok(Some(outcome))
    }
}

/// A directory and its files' lengths by name.
type Listed = (SafeDir, HashMap<String, u64>);

/// Directory listings of the tiers, by relative directory (`None`: not there).
#[derive(Default)]
struct Listing {
    dirs: HashMap<String, Option<Listed>>,
}

impl Listing {
    fn dir(&mut self, root: &SafeDir, rel: &str) -> Option<&Listed> {
        self.dirs
            .entry(rel.to_owned())
            .or_insert_with(|| {
                let mut dir = root.clone();
                for part in rel.split('/') {
                    dir = dir.existing_subdir(part).ok()??;
                }
                let files = dir
                    .entries()
                    .ok()?
                    .into_iter()
                    .filter(|e| e.is_file)
                    .map(|e| (e.name, e.len))
                    .collect();
                Some((dir, files))
            })
            .as_ref()
    }

    /// `(directory, file name, length)` of an index path, when that file is there.
    fn file(&mut self, root: &SafeDir, path: &str) -> Option<(SafeDir, String, u64)> {
        let (rel, name) = path.rsplit_once('/')?;
        let (dir, files) = self.dir(root, rel)?;
        let len = *files.get(name)?;
        Some((dir.clone(), name.to_owned(), len))
    }
}

/// One pass at `now` (Unix nanoseconds).
pub(crate) fn pass(root: &SafeDir, policy: &Policy, now: i64) -> Result<Outcome, RetentionError> {
    let mut out = Outcome::default();
    let mut listing = Listing::default();
    let text = if root.exists(INDEX_FILE)? {
        root.read(INDEX_FILE, MAX_READ)?
    } else {
        Vec::new()
    };
    let mut entries = Vec::new();
    let mut sizes = Vec::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(entry) = serde_json::from_slice::<IndexEntry>(line) else {
            out.lines_dropped += 1;
            continue;
        };
        match listing.file(root, &entry.path) {
            Some((_, _, len)) => {
                sizes.push(len);
                entries.push(entry);
            }
            None => out.lines_dropped += 1,
        }
    }

    // Merges first; expiry is decided on the result, so an hour merged now can expire in this pass.
    let tiers = plan::plan_tiers(&entries, policy, now);
    let mut gone: HashSet<usize> = HashSet::new();
    let mut added = Vec::new();
    for m in &tiers.merges {
        match merge_one(root, &mut listing, &entries, m) {
            Ok((entry, len)) => {
                out.windows_merged += m
                    .members
                    .iter()
                    .filter(|&&i| !entries[i].path.starts_with(HOURLY_DIR))
                    .count() as u64;
                out.hourly_written += 1;
                gone.extend(&m.members);
                added.push((entry, len));
            }
            Err(err) => {
                out.merge_failures += 1;
                tracing::warn!(%err, hour = m.hour_start_secs, "cannot merge windows into an hourly profile; they are kept");
            }
        }
    }
    let mut kept: Vec<(IndexEntry, u64)> = entries
        .iter()
        .zip(&sizes)
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, (e, &s))| (e.clone(), s))
        .collect();
    kept.extend(added);
    let after = plan::plan_tiers(
        &kept.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
        policy,
        now,
    );
    out.next_due_nanos = after.next_due_nanos;
    out.expired = after.expired.len() as u64;
    let expired: HashSet<usize> = after.expired.into_iter().collect();
    let mut kept: Vec<(IndexEntry, u64)> = kept
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !expired.contains(i))
        .map(|(_, k)| k)
        .collect();
    kept.sort_by_key(|(e, _)| (e.start_unix_nanos, e.end_unix_nanos));
    let (kept_entries, kept_sizes): (Vec<IndexEntry>, Vec<u64>) = kept.into_iter().unzip();
    let capped: HashSet<usize> = plan::plan_cap(&kept_entries, &kept_sizes, policy.max_bytes)
        .into_iter()
        .collect();
    out.capped = capped.len() as u64;
    out.capped_bytes = capped.iter().map(|&i| kept_sizes[i]).sum();
    out.bytes_after = kept_sizes.iter().sum::<u64>() - out.capped_bytes;

    // The new index first: a crash after it leaves files no line names, swept by the next pass.
    let mut index = root.create_new(INDEX_FILE)?;
    let mut named = HashSet::new();
    for (i, e) in kept_entries.iter().enumerate() {
        if capped.contains(&i) {
            continue;
        }
        let mut line = serde_json::to_vec(e).expect("index entries serialize");
        line.push(b'\n');
        index.write_all(&line)?;
        named.insert(e.path.clone());
    }
    index.commit(true)?;
    out.orphans = sweep(root, &named)?;
    Ok(out)
}

/// Deletes every profile file of the tiers that the index does not name, and the directories left
/// empty; returns how many files went. (Merged, expired and capped profiles go this way.)
fn sweep(root: &SafeDir, named: &HashSet<String>) -> Result<u64, StorageError> {
    let mut deleted = 0;
    for tier in [PROFILES_DIR, HOURLY_DIR] {
        let Some(tier_dir) = root.existing_subdir(tier)? else {
            continue;
        };
        for period in tier_dir.entries()?.into_iter().filter(|e| e.is_dir) {
            let dir = tier_dir.subdir(&period.name)?;
            let mut left = 0;
            for file in dir.entries()? {
                let path = format!("{tier}/{}/{}", period.name, file.name);
                if file.is_file && file.name.ends_with(".pb.gz") && !named.contains(&path) {
                    dir.remove(&file.name)?;
                    deleted += 1;
                } else {
                    left += 1;
                }
            }
            if left == 0 {
                tier_dir.remove_dir(&period.name)?;
            }
        }
    }
    Ok(deleted)
}

#[derive(Debug, thiserror::Error)]
enum MergeFailure {
    #[error("{0} is gone")]
    Missing(String),
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Merges one group and writes it under `hourly/<hour>/`; returns its entry and size.
fn merge_one(
    root: &SafeDir,
    listing: &mut Listing,
    entries: &[IndexEntry],
    m: &plan::Merge,
) -> Result<(IndexEntry, u64), MergeFailure> {
    let mut merger = Merger::default();
    for &i in &m.members {
        let path = &entries[i].path;
        let (dir, name, _) = listing
            .file(root, path)
            .ok_or_else(|| MergeFailure::Missing(path.clone()))?;
        let unreadable = |reason: String| MergeFailure::Unreadable {
            path: path.clone(),
            reason,
        };
        let mut raw = Vec::new();
        GzDecoder::new(dir.open_read(&name)?)
            .take(MAX_READ)
            .read_to_end(&mut raw)
            .map_err(|e| unreadable(e.to_string()))?;
        let profile =
            proto::Profile::decode(raw.as_slice()).map_err(|e| unreadable(e.to_string()))?;
        merger
            .add(&profile)
            .map_err(|e| unreadable(e.to_string()))?;
    }
    let first = &entries[m.members[0]];
    let stem = first
        .path
        .rsplit_once('/')
        .map_or(first.path.as_str(), |(_, n)| n)
        .trim_end_matches(".pb.gz")
        .to_owned();
    let compressed = crate::profile::gzip::compress(&merger.finish().encode_to_vec());
    let bytes = &compressed;
    let dir = root
        .subdir(HOURLY_DIR)?
        .subdir(&m.hour_start_secs.to_string())?;
    let name = dir.write_unique(&stem, ".pb.gz", bytes, Durability::Now)?;
    let members = m.members.iter().map(|&i| &entries[i]);
    let entry = IndexEntry {
        path: format!("{HOURLY_DIR}/{}/{name}", m.hour_start_secs),
        kind: first.kind,
        start_unix_nanos: members
            .clone()
            .map(|e| e.start_unix_nanos)
            .min()
            .unwrap_or(0),
        end_unix_nanos: members.map(|e| e.end_unix_nanos).max().unwrap_or(0),
        tags: first.tags.clone(),
    };
    Ok((entry, bytes.len() as u64))
}
