//! JIT symbols from perf maps: runtimes that generate code (Node `--perf-basic-prof`, the JVM with
//! perf-map-agent, Python 3.12 `-X perf`, .NET `DOTNET_PerfMapEnabled`) append `START SIZE name` lines
//! to `/tmp/perf-PID.map`. The file is read inside the process's root, under the pid the process has in
//! its own namespace, and read again (only the new part) when it grows. A process without one costs a
//! failed `stat` per window.

use std::{
    collections::HashMap,
    fs::File,
    io::{Read as _, Seek as _, SeekFrom},
    path::PathBuf,
    sync::Arc,
};

use crate::{process::proc_dir, profile::Symbol};

/// Most bytes read from one perf map: a runtime that writes more is misbehaving, and the rest is
/// ignored (counted) rather than held in memory.
const MAX_BYTES: u64 = 64 << 20;

/// Counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfMapStats {
    /// Perf maps read (or read further after growing).
    pub reads: u64,
    /// Entries parsed.
    pub entries: u64,
    /// Lines that are not `START SIZE name`.
    pub bad_lines: u64,
    /// Bytes ignored beyond the per-map bound.
    pub truncated_bytes: u64,
}

#[derive(Default)]
struct PerfMap {
    /// Bytes consumed so far (up to the last complete line).
    read: u64,
    /// Entries sorted by start; for equal starts the later line wins.
    entries: Vec<(u64, u64, Arc<[Symbol]>)>,
}

/// The perf maps of sampled processes.
#[derive(Default)]
pub(crate) struct PerfMaps {
    maps: HashMap<u32, PerfMap>,
    stats: PerfMapStats,
}

impl PerfMaps {
    /// Counters so far.
    pub fn stats(&self) -> PerfMapStats {
        self.stats
    }

    /// Reads what `pid`'s perf map gained since the last call. A process that is gone keeps what was
    /// read.
    pub fn refresh(&mut self, pid: u32) {
        let Some(path) = path_of(pid) else { return };
        let Ok(mut file) = File::open(&path) else {
            return;
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
        let mut added = Vec::new();
        for line in text[..complete].split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(line) {
                Some(entry) => added.push(entry),
                None => self.stats.bad_lines += 1,
            }
        }
        self.stats.entries += added.len() as u64;
        map.entries.extend(added);
        // Stable: among equal starts the later line stays last, and lookups take the last.
        map.entries.sort_by_key(|e| e.0);
    }

    /// The perf map's name for `addr` in `pid`.
    pub fn lookup(&self, pid: u32, addr: u64) -> Option<Arc<[Symbol]>> {
        let entries = &self.maps.get(&pid)?.entries;
        let idx = entries.partition_point(|e| e.0 <= addr);
        let (start, size, symbols) = entries.get(idx.checked_sub(1)?)?;
        (addr < start.saturating_add(*size)).then(|| symbols.clone())
    }

    /// Forgets processes not in `live`.
    pub fn retain(&mut self, live: &std::collections::HashSet<u32>) {
        self.maps.retain(|pid, _| live.contains(pid));
    }
}

/// `/proc/PID/root/tmp/perf-NSPID.map`, NSPID being the pid inside the process's pid namespace.
fn path_of(pid: u32) -> Option<PathBuf> {
    let dir = proc_dir(pid);
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let ns_pid = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .unwrap_or("")
        .to_owned();
    let ns_pid = if ns_pid.is_empty() {
        pid.to_string()
    } else {
        ns_pid
    };
    Some(dir.join(format!("root/tmp/perf-{ns_pid}.map")))
}

/// `START SIZE name`, hex numbers with or without `0x`; the name is the rest of the line.
fn parse_line(line: &[u8]) -> Option<(u64, u64, Arc<[Symbol]>)> {
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
        let path = path_of(pid).unwrap();
        let mut file = File::create(&path).unwrap();
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
