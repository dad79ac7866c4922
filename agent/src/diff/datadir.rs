//! Selects profiles from sonde's local data directory by tags and time.
//!
//! Contract (written by `sonde run`): `<DIR>/index.jsonl`, one JSON object per line,
//! `{"path", "offset", "length", "kind": "cpu"|"offcpu", "start_unix_nanos", "end_unix_nanos",
//! "tags": {...}}`, `path` relative to `DIR`, `offset` and `length` the profile's place in the
//! decompressed file when it is a window's pack (`crate::datadir`). A selector `KEY=VALUE` matches
//! one tag; the short keys below are aliases of the OpenTelemetry
//! resource attributes sonde writes, any other key is matched exactly. Selectors of one side are ANDed.
//!
//! The index is input like any profile: read within `--max-input-mib`, and an entry whose `path` leaves
//! the directory (absolute, or through `..`) is refused, so an index cannot point diff at `/dev/zero`.

use std::path::Path;

use super::{error::DiffError, input::Limits, load::Source};
use crate::profile::model::ProfileKind;

/// Short selector keys and the tag each stands for.
pub const ALIASES: &[(&str, &str)] = &[
    ("version", "service.version"),
    ("service", "service.name"),
    ("host", "host.name"),
    ("region", "cloud.region"),
    ("pod", "k8s.pod.name"),
    ("namespace", "k8s.namespace.name"),
];

/// One line of `index.jsonl` (the format is `crate::datadir`'s). Fields added by later versions of
/// `sonde run` are ignored; a line that is not an entry is an error.
pub use crate::datadir::IndexEntry as Entry;

/// A parsed `KEY=VALUE` selector, the key resolved through [`ALIASES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// Tag name.
    pub key: String,
    /// Required value.
    pub value: String,
}

impl Selector {
    /// Parses `KEY=VALUE`.
    pub fn parse(text: &str) -> Result<Self, DiffError> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| DiffError::BadSelector(text.to_owned()))?;
        if key.is_empty() {
            return Err(DiffError::BadSelector(text.to_owned()));
        }
        let key = ALIASES
            .iter()
            .find(|(alias, _)| *alias == key)
            .map_or(key, |(_, tag)| tag);
        Ok(Selector {
            key: key.to_owned(),
            value: value.to_owned(),
        })
    }

    fn matches(&self, entry: &Entry) -> bool {
        entry.tags.get(&self.key) == Some(self.value.as_str())
    }
}

/// What to select for one side.
#[derive(Debug)]
pub struct Query<'a> {
    /// `base` or `new`, for messages.
    pub side: &'static str,
    /// Selectors as typed, for messages.
    pub raw: &'a [String],
    /// Profile kind (`cpu` or `offcpu`).
    pub kind: ProfileKind,
    /// Keep captures that end after this (Unix nanoseconds).
    pub since: Option<i64>,
    /// Keep captures that start before this (Unix nanoseconds).
    pub until: Option<i64>,
}

/// The usable entries of an index, and why the others were skipped.
#[derive(Debug, Default)]
pub struct Index {
    /// Entries that parsed and whose file is there.
    pub entries: Vec<Entry>,
    /// One message per skipped line.
    pub skipped: Vec<String>,
}

/// Reads `<dir>/index.jsonl`. A line that does not parse, leaves the directory or names a file that is
/// not there (a torn write, a pruned window) is skipped and reported; with `strict` it is an error.
pub fn read_index(dir: &Path, limits: Limits, strict: bool) -> Result<Index, DiffError> {
    let path = dir.join("index.jsonl");
    let text = super::input::read_text(&path, limits).map_err(|e| match e {
        DiffError::Read { path, source } => DiffError::Index { path, source },
        other => other,
    })?;
    let mut index = Index::default();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let usable = parse_entry(line).and_then(|entry| {
            match std::fs::symlink_metadata(dir.join(&entry.path)) {
                Ok(meta) if meta.is_file() => Ok(entry),
                Ok(_) => Err(format!("{:?} is not a regular file", entry.path)),
                Err(e) => Err(format!("file {:?}: {e}", entry.path)),
            }
        });
        match usable {
            Ok(entry) => index.entries.push(entry),
            Err(reason) if strict => {
                return Err(DiffError::IndexLine {
                    path,
                    line: n + 1,
                    reason,
                });
            }
            Err(reason) => index.skipped.push(format!(
                "{} line {}: skipped ({reason})",
                path.display(),
                n + 1
            )),
        }
    }
    Ok(index)
}

/// Parses one line of the index.
pub fn parse_entry(line: &str) -> Result<Entry, String> {
    Entry::parse_line(line)
}

/// The profiles of `entries` that match `query`, their paths under `dir`.
pub fn select(dir: &Path, entries: &[Entry], query: &Query<'_>) -> Result<Vec<Source>, DiffError> {
    let selectors = query
        .raw
        .iter()
        .map(|s| Selector::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let tagged = |e: &&Entry| selectors.iter().all(|s| s.matches(e));
    let in_window = |e: &&Entry| {
        query.since.is_none_or(|t| e.end_unix_nanos > t)
            && query.until.is_none_or(|t| e.start_unix_nanos < t)
    };
    let files: Vec<Source> = entries
        .iter()
        .filter(tagged)
        .filter(|e| e.kind == query.kind)
        .filter(in_window)
        .map(|e| Source::Indexed {
            path: dir.join(&e.path),
            entry: e.clone(),
        })
        .collect();
    if !files.is_empty() {
        return Ok(files);
    }
    // Say which filter emptied the selection, the most useful thing to know when nothing matched.
    let tag_hits = entries.iter().filter(tagged).count();
    let kind_hits = entries
        .iter()
        .filter(tagged)
        .filter(|e| e.kind == query.kind)
        .count();
    let hint = if tag_hits == 0 {
        String::new()
    } else if kind_hits == 0 {
        format!(
            " ({tag_hits} match the tags but none is of kind {}; see --sample-type)",
            query.kind.name()
        )
    } else {
        format!(" ({kind_hits} match the tags but none falls in the --since/--until window)")
    };
    Err(DiffError::NoMatch {
        side: query.side,
        kind: query.kind.name().to_owned(),
        dir: dir.to_owned(),
        selectors: query.raw.join(" "),
        hint,
    })
}

/// Parses `--since`/`--until`: Unix seconds (`1767225600`), RFC 3339 (`2026-01-01T00:00:00Z`,
/// fractional seconds and `+HH:MM` offsets allowed), `now`, or `now-<N><unit>` with unit `s`, `m`, `h` or
/// `d` (`now-1h`). Returns Unix nanoseconds.
pub fn parse_time(text: &str) -> Result<i64, DiffError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    parse_time_at(text, now)
}

/// [`parse_time`] with `now` given (Unix nanoseconds), so relative times can be tested.
pub fn parse_time_at(text: &str, now: i64) -> Result<i64, DiffError> {
    let bad = || DiffError::BadTime(text.to_owned());
    if let Some(relative) = text.strip_prefix("now") {
        if relative.is_empty() {
            return Ok(now);
        }
        let ago = relative.strip_prefix('-').ok_or_else(bad)?;
        let unit_seconds = match ago.as_bytes().last() {
            Some(b's') => 1,
            Some(b'm') => 60,
            Some(b'h') => 3600,
            Some(b'd') => 86_400,
            _ => return Err(bad()),
        };
        // The unit is one ASCII byte, so this slice ends on a character boundary.
        let count = &ago[..ago.len() - 1];
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        return count
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(unit_seconds)?.checked_mul(NANOS))
            .and_then(|ago| now.checked_sub(ago))
            .ok_or_else(bad);
    }
    if let Ok(seconds) = text.parse::<i64>() {
        return seconds.checked_mul(NANOS).ok_or_else(bad);
    }
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| {
        text.get(r)
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(bad)
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let mut rest = &text[19..];
    let mut nanos = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let padded = format!("{:0<9}", &frac[..digits.min(9)]);
        nanos = padded.parse().map_err(|_| bad())?;
        rest = &frac[digits..];
    }
    // Matched as bytes: slicing the text would panic inside a multi-byte character (found by fuzzing).
    let two_digits = |hi: u8, lo: u8| match (hi, lo) {
        (b'0'..=b'9', b'0'..=b'9') => Ok(i64::from(hi - b'0') * 10 + i64::from(lo - b'0')),
        _ => Err(bad()),
    };
    let offset_seconds = match *rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let sign = if sign == b'-' { -1 } else { 1 };
            sign * (two_digits(h1, h2)? * 3600 + two_digits(m1, m2)? * 60)
        }
        _ => return Err(bad()),
    };
    // Four-digit years keep the seconds small, but past 2262 their nanoseconds overflow an i64.
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_seconds;
    seconds
        .checked_mul(NANOS)
        .and_then(|n| n.checked_add(nanos))
        .ok_or_else(bad)
}

const NANOS: i64 = 1_000_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_rfc3339_or_unix_seconds() {
        assert_eq!(parse_time("0").unwrap(), 0);
        assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_time("2026-01-01T00:00:00Z").unwrap(),
            1_767_225_600 * 1_000_000_000
        );
        assert_eq!(
            parse_time("2026-01-01T01:00:00.5+01:00").unwrap(),
            1_767_225_600 * 1_000_000_000 + 500_000_000
        );
        assert!(parse_time("yesterday").is_err());
        assert!(parse_time("2026-13-01T00:00:00Z").is_err());
        assert!(
            parse_time("9999-12-31T23:59:59Z").is_err(),
            "past i64 nanoseconds"
        );
        assert!(parse_time("9999999999999").is_err());
        assert_eq!(
            parse_time("1970-01-01T01:30:00+01:30").unwrap(),
            0,
            "offsets are subtracted"
        );
    }

    #[test]
    fn relative_times_count_back_from_now() {
        let now = 1_767_229_200 * NANOS;
        assert_eq!(parse_time_at("now", now).unwrap(), now);
        assert_eq!(parse_time_at("now-1h", now).unwrap(), 1_767_225_600 * NANOS);
        assert_eq!(parse_time_at("now-30m", now).unwrap(), now - 1800 * NANOS);
        assert_eq!(parse_time_at("now-45s", now).unwrap(), now - 45 * NANOS);
        assert_eq!(
            parse_time_at("now-2d", now).unwrap(),
            now - 2 * 86_400 * NANOS
        );
        assert_eq!(parse_time_at("now-0h", now).unwrap(), now);
        for bad in [
            "now-",
            "now-h",
            "now-1",
            "now-1w",
            "now+1h",
            "now-1.5h",
            "now--1h",
            "now-1hh",
            "now-\u{e9}",
            "now-1\u{e9}",
            "now-99999999999999999d",
            "nowish",
        ] {
            assert!(parse_time_at(bad, now).is_err(), "{bad}");
        }
        assert!(
            parse_time_at("now-106751d", 0).is_ok() && parse_time_at("now-106752d", 0).is_err(),
            "past i64 nanoseconds"
        );
    }

    #[test]
    fn times_with_multibyte_characters_are_errors_not_panics() {
        // Found by the `index_line` fuzz target: a two-byte character where the offset starts.
        assert!(parse_time("4052-01-01T01:00:00\u{492}.500").is_err());
        assert!(parse_time("2026-01-01T00:00:00+\u{e9}:00").is_err());
        assert!(parse_time("2026-01-01T00:00:00.5\u{e9}").is_err());
    }

    #[test]
    fn index_paths_stay_inside_the_data_directory() {
        let line = |path: &str| {
            format!(
                r#"{{"path":{path:?},"kind":"cpu","start_unix_nanos":0,"end_unix_nanos":1,"tags":{{}}}}"#
            )
        };
        assert!(parse_entry(&line("profiles/1/a.pb.gz")).is_ok());
        for bad in ["/dev/zero", "../secret.pb.gz", "profiles/../../x", ""] {
            let err = parse_entry(&line(bad)).unwrap_err();
            assert!(err.contains("inside the data directory"), "{bad}: {err}");
        }
        assert!(parse_entry("not json").is_err());
    }

    #[test]
    fn selector_aliases_resolve_to_resource_attributes() {
        assert_eq!(
            Selector::parse("version=2.4").unwrap().key,
            "service.version"
        );
        assert_eq!(
            Selector::parse("custom.key=a=b").unwrap(),
            Selector {
                key: "custom.key".into(),
                value: "a=b".into()
            }
        );
        assert!(Selector::parse("version").is_err());
    }
}
