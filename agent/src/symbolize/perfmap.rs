//! JIT symbols from perf maps: runtimes that generate code (Node `--perf-basic-prof`, the JVM with
//! perf-map-agent, Python 3.12 `-X perf`, .NET `DOTNET_PerfMapEnabled`) append `START SIZE name` lines
//! to `/tmp/perf-PID.map`. The file is read inside the process's root, under the pid the process has in
//! its own namespace, and read again (only the new part) when it grows. A process without one costs a
//! failed `open` per window.
//!
//! The process controls the file, so it is opened by the rules of
//! [`untrusted`](crate::process::untrusted): never through a symbolic link, only a regular file owned by
//! the process's user or root and readable by that user (perf's rule), never blocking. Each process's
//! map is bounded in bytes and in entries; what lies beyond is counted, not held.

use std::{
    collections::HashMap,
    io::{Read as _, Seek as _, SeekFrom},
    path::PathBuf,
    sync::Arc,
};

use crate::{
    process::{
        proc_dir,
        untrusted::{self, Input, Owner, Reason, Refused, Rules},
    },
    profile::Symbol,
};

/// Most bytes read from one perf map: a runtime that writes more is misbehaving, and the rest is
/// ignored (counted) rather than held in memory.
const MAX_BYTES: u64 = 64 << 20;

/// Most entries kept for one process (a busy Node service writes a few hundred thousand over a day).
const MAX_ENTRIES: usize = 1 << 20;

/// How perf maps are opened: no links, owned by the process's user or root, readable by that user;
/// any size (only the first [`MAX_BYTES`] are read).
const RULES: Rules = Rules {
    input: Input::PerfMap,
    symlinks: false,
    owned: true,
    user_readable: true,
    max_bytes: u64::MAX,
};

/// Counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PerfMapStats {
    /// Perf maps read (or read further after growing).
    pub reads: u64,
    /// Entries parsed.
    pub entries: u64,
    /// Lines that are not `START SIZE name`.
    pub bad_lines: u64,
    /// Bytes ignored beyond the per-map bound.
    pub truncated_bytes: u64,
}

/// One perf map line: start, size, name.
pub(crate) type Entry = (u64, u64, Arc<[Symbol]>);

#[derive(Default)]
struct PerfMap {
    /// Bytes consumed so far (up to the last complete line).
    read: u64,
    /// Entries sorted by start; for equal starts the later line wins.
    entries: Vec<Entry>,
}

/// The perf maps of sampled processes.
#[derive(Default)]
pub(crate) struct PerfMaps {
    maps: HashMap<u32, PerfMap>,
    stats: PerfMapStats,
}

impl PerfMaps {
    /// Counters so far.
    pub(crate) fn stats(&self) -> PerfMapStats {
        self.stats
    }

    /// Reads what `pid`'s perf map gained since the last call. A process that is gone keeps what was
    /// read.
    pub(crate) fn refresh(&mut self, pid: u32) {
        let Some(owner) = Owner::of(pid) else { return };
        let path = PathBuf::from(format!("/tmp/perf-{}.map", owner.ns_pid));
        let mut file = match untrusted::open_in_root(
            &proc_dir(pid).join("root"),
            &path,
            Some(&owner),
            RULES,
        ) {
            Ok(file) => file,
            Err(Refused::Absent) => return,
            Err(why) => {
                tracing::debug!(pid, %why, "perf map not read");
                return;
            }
        };
        let len = file.metadata().map_or(0, |m| m.len());
        let map = self.maps.entry(pid).or_default();
        if len < map.read {
            // Rewritten, not appended to: start over.
            *map = PerfMap::default();
        }
        let end = len.min(MAX_BYTES);
        self.stats.truncated_bytes += len - end;
        if end <= map.read || file.seek(SeekFrom::Start(map.read)).is_err() {
            return;
        }
        let mut text = Vec::new();
        if (&mut file)
            .take(end - map.read)
            .read_to_end(&mut text)
            .is_err()
        {
            return;
        }
        // Only complete lines: the runtime may be mid-write.
        let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        map.read += complete as u64;
        self.stats.reads += 1;
        let (mut added, bad_lines) = parse_lines(&text[..complete]);
        self.stats.bad_lines += bad_lines;
        let room = MAX_ENTRIES.saturating_sub(map.entries.len());
        if added.len() > room {
            added.truncate(room);
            untrusted::refusals::count(Input::PerfMap, Reason::Budget);
        }
        self.stats.entries += added.len() as u64;
        map.entries.extend(added);
        // Stable: among equal starts the later line stays last, and lookups take the last.
        map.entries.sort_by_key(|e| e.0);
    }

    /// The perf map's name for `addr` in `pid`.
    pub(crate) fn lookup(&self, pid: u32, addr: u64) -> Option<Arc<[Symbol]>> {
        let entries = &self.maps.get(&pid)?.entries;
        let idx = entries.partition_point(|e| e.0 <= addr);
        let (start, size, symbols) = entries.get(idx.checked_sub(1)?)?;
        (addr < start.saturating_add(*size)).then(|| symbols.clone())
    }

    /// Forgets processes not in `live`.
    pub(crate) fn retain(&mut self, live: &std::collections::HashSet<u32>) {
        self.maps.retain(|pid, _| live.contains(pid));
    }
}

/// The entries of complete lines of perf map text, and how many lines were not entries.
pub(crate) fn parse_lines(text: &[u8]) -> (Vec<Entry>, u64) {
    let mut entries = Vec::new();
    let mut bad = 0;
    for line in text.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(line) {
            Some(entry) => entries.push(entry),
            None => bad += 1,
        }
    }
    (entries, bad)
}

/// `START SIZE name`, hex numbers with or without `0x`; the name is the rest of the line.
fn parse_line(line: &[u8]) -> Option<Entry> {
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let mut parts = line.splitn(3, ' ');
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next()?.trim();
    if name.is_empty() || size == 0 {
        return None;
    }
    let symbol = Symbol {
        name: name.to_owned(),
        file: None,
        line: None,
    };
    Some((start, size, Arc::from(vec![symbol])))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn name(maps: &PerfMaps, pid: u32, addr: u64) -> Option<String> {
        maps.lookup(pid, addr).map(|s| s[0].name.clone())
    }

    #[test]
    fn lines_parse_with_or_without_0x_and_names_keep_spaces() {
        let (start, size, sym) =
            parse_line(b"7f00aa001000 40 LazyCompile:*add /srv/app.js:3").unwrap();
        assert_eq!((start, size), (0x7f00aa001000, 0x40));
        assert_eq!(sym[0].name, "LazyCompile:*add /srv/app.js:3");
        assert!(parse_line(b"0x1000 0x10 py::f:/x.py").is_some());
        assert!(parse_line(b"zz 10 f").is_none());
        assert!(parse_line(b"1000 0 empty").is_none());
    }

    #[test]
    fn the_map_is_read_again_when_it_grows() {
        // This test process's own perf map, as a runtime would write it.
        let pid = std::process::id();
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(file, "1000 100 first").unwrap();
        write!(file, "2000 100 sec").unwrap(); // a line being written
        let mut maps = PerfMaps::default();
        maps.refresh(pid);
        assert_eq!(name(&maps, pid, 0x1050).as_deref(), Some("first"));
        assert_eq!(name(&maps, pid, 0x2050), None, "incomplete line skipped");
        writeln!(file, "ond").unwrap();
        writeln!(file, "1000 80 first_recompiled").unwrap();
        maps.refresh(pid);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(name(&maps, pid, 0x2050).as_deref(), Some("second"));
        assert_eq!(
            name(&maps, pid, 0x1010).as_deref(),
            Some("first_recompiled"),
            "the later entry wins"
        );
        assert_eq!(name(&maps, pid, 0x3000), None);
        maps.refresh(pid);
        assert_eq!(
            name(&maps, pid, 0x2050).as_deref(),
            Some("second"),
            "a removed map keeps what was read"
        );
        assert_eq!(maps.stats().bad_lines, 0);
    }
}
