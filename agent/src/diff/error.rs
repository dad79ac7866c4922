//! The errors of `sonde diff`. Each message says what went wrong with which input and what to do about it.

use std::path::PathBuf;

/// Why a diff could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// An input file could not be read.
    #[error("cannot read {path}: {source}; check the path and its permissions")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the gzip magic bytes.
    #[error(
        "{path} is not gzip-compressed; sonde diff reads gzip pprof files (as written by `sonde record`)"
    )]
    NotGzip {
        /// The file.
        path: PathBuf,
    },
    /// The gzip stream is damaged or truncated.
    #[error("{path} is a corrupt or truncated gzip file ({source}); copy the profile again")]
    CorruptGzip {
        /// The file.
        path: PathBuf,
        /// The decompression error.
        #[source]
        source: std::io::Error,
    },
    /// The decompressed bytes are not a `perftools.profiles.Profile`.
    #[error("{path} is not a pprof profile ({reason}); pass gzip pprof files")]
    NotPprof {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The profile holds no sample types or no samples.
    #[error("{path} is an empty profile (no {what}); pick a capture that recorded samples")]
    EmptyProfile {
        /// The file.
        path: PathBuf,
        /// What is missing.
        what: String,
    },
    /// One side sums to zero for the chosen sample type.
    #[error(
        "the {side} profile has no `{sample_type}` value at all; choose another --sample-type or another capture"
    )]
    EmptySide {
        /// `base` or `new`.
        side: &'static str,
        /// The chosen sample type.
        sample_type: String,
    },
    /// The requested sample type is not in a file.
    #[error(
        "{path} has no sample type `{wanted}` (it has: {available}); choose one with --sample-type"
    )]
    MissingSampleType {
        /// The file.
        path: PathBuf,
        /// The requested type.
        wanted: String,
        /// The types the file does have.
        available: String,
    },
    /// The two sides (or two files of one side) measure different things.
    #[error(
        "sample types differ: {first} has `{first_type}` but {other} has `{other_type}`; \
         pass --sample-type with a type both sides have"
    )]
    SampleTypeMismatch {
        /// A file of the first kind.
        first: PathBuf,
        /// Its type (`name/unit`).
        first_type: String,
        /// A file of the other kind.
        other: PathBuf,
        /// Its type (`name/unit`).
        other_type: String,
    },
    /// `--data` was given but its index cannot be read.
    #[error("cannot read {path}: {source}; is --data the directory `sonde run` writes to?")]
    Index {
        /// The index file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line of `index.jsonl` is not an index entry.
    #[error("{path} line {line}: not an index entry ({reason}); fix or remove that line")]
    IndexLine {
        /// The index file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        reason: String,
    },
    /// A selector is not `KEY=VALUE`.
    #[error(
        "selector `{0}` is not KEY=VALUE (for example version=2.4); with --data, --base/--new take selectors"
    )]
    BadSelector(String),
    /// A `--since`/`--until` value could not be parsed.
    #[error("time `{0}` is neither RFC 3339 (2026-01-31T12:00:00Z) nor Unix seconds")]
    BadTime(String),
    /// No index entry matched one side's selectors.
    #[error(
        "no {kind} profile in {dir} matches the {side} selectors {selectors}{hint}; check the tags with `grep` on index.jsonl"
    )]
    NoMatch {
        /// `base` or `new`.
        side: &'static str,
        /// Profile kind looked for.
        kind: String,
        /// The data directory.
        dir: PathBuf,
        /// The selectors, as given.
        selectors: String,
        /// Extra advice (e.g. about the time window or kind).
        hint: String,
    },
    /// An output file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `--per-cpu-second` needs capture durations the profiles do not record.
    #[error(
        "the {side} profile records no capture duration, so --per-cpu-second cannot be used; pass --base-requests/--new-requests or drop the flag"
    )]
    NoDuration {
        /// `base` or `new`.
        side: &'static str,
    },
}
