//! Carries out a retention pass on the data directory: merge, expire, cap, rewrite the index, delete.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    io::Read as _,
};

use flate2::read::GzDecoder;
use prost::Message as _;

use super::{Policy, RetentionError, merge::Merger, plan};
use crate::{
    datadir::{HOURLY_DIR, INDEX_FILE, IndexEntry, PACK_EXT, PROFILES_DIR, Pack},
    profile::pprof::proto,
    storage::{Durability, SafeDir, StorageError},
};

/// The index and a profile file (decompressed) are read up to this; far above what sonde writes.
const MAX_READ: u64 = 1 << 30;
/// Hourly profiles merged at once: each holds its merged profile in memory while the files of its
/// hour are read, each file once per batch (a window's pack holds every service's profile).
const MERGES_AT_ONCE: usize = 256;

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
    let mut file_lens = Vec::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(entry) = serde_json::from_slice::<IndexEntry>(line) else {
            out.lines_dropped += 1;
            continue;
        };
        match listing.file(root, &entry.path) {
            Some((_, _, len)) => {
                file_lens.push(len);
                entries.push(entry);
            }
            None => out.lines_dropped += 1,
        }
    }
    let sizes = shares(&entries, &file_lens);

    // Merges first; expiry is decided on the result, so an hour merged now can expire in this pass.
    let tiers = plan::plan_tiers(&entries, policy, now);
    let mut gone: HashSet<usize> = HashSet::new();
    let mut added = Vec::new();
    for batch in tiers.merges.chunks(MERGES_AT_ONCE) {
        for (m, merged) in batch
            .iter()
            .zip(merge_batch(root, &mut listing, &entries, batch))
        {
            match merged {
                Ok(entry) => {
                    out.windows_merged += m
                        .members
                        .iter()
                        .filter(|&&i| !entries[i].path.starts_with(HOURLY_DIR))
                        .count() as u64;
                    out.hourly_written += 1;
                    gone.extend(&m.members);
                    added.push(entry);
                }
                Err(err) => {
                    out.merge_failures += 1;
                    tracing::warn!(%err, hour = m.hour_start_secs, "cannot merge windows into an hourly profile; they are kept");
                }
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
                let profiles = file.name.ends_with(".pb.gz") || file.name.ends_with(PACK_EXT);
                if file.is_file && profiles && !named.contains(&path) {
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

/// Each entry's share of its file's bytes, by the length of its profile (so the shares of a file
/// add up to its length, and a single-profile file's share is all of it).
fn shares(entries: &[IndexEntry], file_lens: &[u64]) -> Vec<u64> {
    let weight = |e: &IndexEntry| e.length.unwrap_or(1).max(1);
    let mut per_file: HashMap<&str, u64> = HashMap::new();
    for e in entries {
        *per_file.entry(&e.path).or_default() += weight(e);
    }
    entries
        .iter()
        .zip(file_lens)
        .map(|(e, &len)| {
            let share =
                u128::from(len) * u128::from(weight(e)) / u128::from(per_file[e.path.as_str()]);
            share as u64
        })
        .collect()
}

#[derive(Clone, Debug, thiserror::Error)]
enum MergeFailure {
    #[error("{0} is gone")]
    Missing(String),
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("writing the hourly profiles: {0}")]
    Unwritten(String),
}

/// Merges one batch of groups, reading each file they draw on once, and writes each hour's merged
/// profiles as one pack under `hourly/<hour>/`; returns each group's entry and its share of the pack.
fn merge_batch(
    root: &SafeDir,
    listing: &mut Listing,
    entries: &[IndexEntry],
    batch: &[plan::Merge],
) -> Vec<Result<(IndexEntry, u64), MergeFailure>> {
    let mut mergers: Vec<Result<Merger, MergeFailure>> =
        batch.iter().map(|_| Ok(Merger::default())).collect();
    // File -> (entry, group) of the members it holds; in path order, so windows merge oldest first.
    let mut by_file: BTreeMap<&str, Vec<(usize, usize)>> = BTreeMap::new();
    for (g, m) in batch.iter().enumerate() {
        for &i in &m.members {
            by_file.entry(&entries[i].path).or_default().push((i, g));
        }
    }
    for (path, members) in by_file {
        if members.iter().all(|&(_, g)| mergers[g].is_err()) {
            continue;
        }
        let raw = match read_decompressed(root, listing, path) {
            Ok(raw) => raw,
            Err(failure) => {
                for &(_, g) in &members {
                    mergers[g] = Err(failure.clone());
                }
                continue;
            }
        };
        for (i, g) in members {
            let Ok(merger) = &mut mergers[g] else {
                continue;
            };
            let added = entries[i].profile_in(&raw).and_then(|bytes| {
                let profile = proto::Profile::decode(bytes).map_err(|e| e.to_string())?;
                merger.add(&profile).map_err(|e| e.to_string())
            });
            if let Err(reason) = added {
                mergers[g] = Err(MergeFailure::Unreadable {
                    path: path.to_owned(),
                    reason,
                });
            }
        }
    }

    // One pack per hour of the batch.
    let mut hours: BTreeMap<i64, (Pack, Vec<usize>)> = BTreeMap::new();
    let mut results: Vec<Option<Result<(IndexEntry, u64), MergeFailure>>> =
        batch.iter().map(|_| None).collect();
    for (g, (m, merger)) in batch.iter().zip(mergers).enumerate() {
        let merger = match merger {
            Ok(merger) => merger,
            Err(failure) => {
                results[g] = Some(Err(failure));
                continue;
            }
        };
        let first = &entries[m.members[0]];
        let members = m.members.iter().map(|&i| &entries[i]);
        let entry = IndexEntry {
            path: String::new(),
            offset: None,
            length: None,
            kind: first.kind,
            start_unix_nanos: members
                .clone()
                .map(|e| e.start_unix_nanos)
                .min()
                .unwrap_or(0),
            end_unix_nanos: members.map(|e| e.end_unix_nanos).max().unwrap_or(0),
            tags: first.tags.clone(),
        };
        let (pack, groups) = hours.entry(m.hour_start_secs).or_default();
        pack.push(&merger.finish().encode_to_vec(), entry);
        groups.push(g);
    }
    for (hour, (pack, groups)) in hours {
        let (bytes, named) = pack.finish();
        let written = root
            .subdir(HOURLY_DIR)
            .and_then(|d| d.subdir(&hour.to_string()))
            .and_then(|dir| dir.write_unique("merged", PACK_EXT, &bytes, Durability::Now));
        match written {
            Ok(name) => {
                let named = named(&format!("{HOURLY_DIR}/{hour}/{name}"));
                let lens = vec![bytes.len() as u64; named.len()];
                let sizes = shares(&named, &lens);
                for ((g, entry), size) in groups.into_iter().zip(named).zip(sizes) {
                    results[g] = Some(Ok((entry, size)));
                }
            }
            Err(err) => {
                for g in groups {
                    results[g] = Some(Err(MergeFailure::Unwritten(err.to_string())));
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.expect("every group ends merged or failed"))
        .collect()
}

/// The decompressed content of the profile file at the index path `path`.
fn read_decompressed(
    root: &SafeDir,
    listing: &mut Listing,
    path: &str,
) -> Result<Vec<u8>, MergeFailure> {
    let (dir, name, _) = listing
        .file(root, path)
        .ok_or_else(|| MergeFailure::Missing(path.to_owned()))?;
    let unreadable = |reason: String| MergeFailure::Unreadable {
        path: path.to_owned(),
        reason,
    };
    let file = dir
        .open_read(&name)
        .map_err(|e| unreadable(e.to_string()))?;
    let mut raw = Vec::new();
    GzDecoder::new(file)
        .take(MAX_READ)
        .read_to_end(&mut raw)
        .map_err(|e| unreadable(e.to_string()))?;
    Ok(raw)
}
