//! The local data directory's layout and its index (`index.jsonl`, one JSON line per profile):
//! written by the local sink (`export/local.rs`), rewritten by retention, read by `/metrics` and by
//! `sonde diff --data`. One definition of the format for all of them.
//!
//! A window's profiles are one file, a pack: their pprof messages concatenated and gzip'd as one
//! stream, each index line naming the file and its profile's `offset` and `length` in the
//! decompressed stream. One file a window, not one a profile: with 1,000 services the daemon created
//! and later deleted ~650 files every 5 s, and allocating their inodes was most of its CPU; and the
//! profiles of a window share most of their strings (function names, tags), so one stream is ~6x
//! smaller than a gzip each (64 KB at the pack's level against 379 KB for 665 profiles) and ~5x
//! cheaper to compress (1.3 against 7 ms). A line
//! without `offset` names a single-profile gzip pprof (written by earlier versions; still read).

use std::path::{Component, Path};

use crate::{metadata::Tags, profile::model::ProfileKind};

/// Name of the index file inside the data directory.
pub const INDEX_FILE: &str = "index.jsonl";
/// Directory of the profile files inside the data directory.
pub(crate) const PROFILES_DIR: &str = "profiles";
/// Extension of a pack file (a single-profile file ends in `.pb.gz`).
pub(crate) const PACK_EXT: &str = ".pprofs.gz";

/// One line of `index.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexEntry {
    /// Path of the gzip file, relative to the data directory, `/`-separated.
    pub path: String,
    /// Where the profile's pprof starts in the decompressed file (absent: the whole file is it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Length of the profile's pprof in the decompressed file (with `offset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// What the profile measures (`cpu` or `offcpu`).
    pub kind: ProfileKind,
    /// Window start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: i64,
    /// Window end, nanoseconds since the Unix epoch.
    pub end_unix_nanos: i64,
    /// The workload's tags.
    #[serde(default)]
    pub tags: std::sync::Arc<Tags>,
}

/// Directory of the hourly tier (retention merges windows into it; windows are under `profiles/`).
pub(crate) const HOURLY_DIR: &str = "hourly";

impl IndexEntry {
    /// Parses one index line; its path must name a file inside the data directory (no `..`, not
    /// absolute), since `sonde diff` opens it, and `offset` and `length` come together.
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
        if entry.offset.is_some() != entry.length.is_some() {
            return Err(format!(
                "{:?} has one of offset and length without the other",
                entry.path
            ));
        }
        Ok(entry)
    }

    /// This entry's pprof bytes out of its file's decompressed content.
    pub fn profile_in<'a>(&self, decompressed: &'a [u8]) -> Result<&'a [u8], String> {
        let (Some(offset), Some(length)) = (self.offset, self.length) else {
            return Ok(decompressed);
        };
        offset
            .checked_add(length)
            .filter(|&end| end <= decompressed.len() as u64)
            .map(|end| &decompressed[offset as usize..end as usize])
            .ok_or_else(|| {
                format!(
                    "bytes {offset}..+{length} are past the end of {:?} ({} bytes decompressed)",
                    self.path,
                    decompressed.len()
                )
            })
    }
}

/// Builds one pack: profiles pushed with their entries, then compressed as one gzip stream.
#[derive(Default)]
pub(crate) struct Pack {
    raw: Vec<u8>,
    entries: Vec<IndexEntry>,
}

impl Pack {
    /// Adds one profile's (uncompressed) pprof bytes; `entry`'s path is set by [`Pack::finish`].
    pub(crate) fn push(&mut self, pprof: &[u8], mut entry: IndexEntry) {
        entry.offset = Some(self.raw.len() as u64);
        entry.length = Some(pprof.len() as u64);
        self.raw.extend_from_slice(pprof);
        self.entries.push(entry);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file's bytes, and a function giving the entries once the file's path is known.
    pub(crate) fn finish(self) -> (Vec<u8>, impl FnOnce(&str) -> Vec<IndexEntry>) {
        let bytes = crate::profile::gzip::compress_pack(&self.raw);
        let mut entries = self.entries;
        (bytes, move |path: &str| {
            for e in &mut entries {
                e.path = path.to_owned();
            }
            entries
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str) -> IndexEntry {
        IndexEntry {
            path: path.to_owned(),
            offset: None,
            length: None,
            kind: ProfileKind::Cpu,
            start_unix_nanos: 1,
            end_unix_nanos: 2,
            tags: Default::default(),
        }
    }

    #[test]
    fn a_pack_gives_back_each_profile_and_an_old_line_the_whole_file() {
        let mut pack = Pack::default();
        pack.push(b"first", entry(""));
        pack.push(b"", entry(""));
        pack.push(b"third!", entry(""));
        let (gz, entries) = pack.finish();
        let entries = entries("profiles/1/window.pprofs.gz");
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let got: Vec<&[u8]> = entries
            .iter()
            .map(|e| e.profile_in(&raw).unwrap())
            .collect();
        assert_eq!(got, [&b"first"[..], b"", b"third!"]);
        for e in &entries {
            let line = serde_json::to_string(e).unwrap();
            assert_eq!(&IndexEntry::parse_line(&line).unwrap(), e);
        }
        // Without offset and length the file is the profile; a slice past the end is an error.
        assert_eq!(entry("a.pb.gz").profile_in(b"abc").unwrap(), b"abc");
        let mut past = entries[2].clone();
        past.length = Some(7);
        assert!(past.profile_in(&raw).unwrap_err().contains("past the end"));
        let half =
            r#"{"path":"p","offset":3,"kind":"cpu","start_unix_nanos":1,"end_unix_nanos":2}"#;
        assert!(
            IndexEntry::parse_line(half)
                .unwrap_err()
                .contains("without the other")
        );
    }
}
