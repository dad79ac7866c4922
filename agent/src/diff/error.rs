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
    /// The input is a FIFO, a device, a directory...: only regular files and `-` are read.
    #[error(
        "{path} is {kind}, not a regular file; sonde diff reads profile files (or `-` for standard input)"
    )]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is instead (`a FIFO`, `a character device`...).
        kind: &'static str,
    },
    /// `-` was given more than once.
    #[error("standard input (`-`) can be read only once; pass the other profiles as files")]
    StdinTwice,
    /// The input passed `--max-input-mib` while being read; reading stopped there.
    #[error(
        "{path} is larger than {limit_mib} MiB {stream}; reading stopped there. A real profile is far \
         smaller: check the file, or raise --max-input-mib if it is genuine"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Which bytes passed the limit.
        stream: Stream,
        /// The limit.
        limit_mib: u64,
    },
    /// A table of the profile would decode to more memory than `--max-input-mib` allows.
    #[error(
        "{path} is not a usable pprof profile: its {table} ({entries} entries) would take {decoded_mib} MiB \
         of memory, more than --max-input-mib {limit_mib}; the file is damaged or built to exhaust memory"
    )]
    TablesTooLarge {
        /// The file.
        path: PathBuf,
        /// The largest table (`string table`, `locations`...).
        table: &'static str,
        /// Its entries.
        entries: u64,
        /// Memory all tables would take decoded, MiB.
        decoded_mib: u64,
        /// The limit.
        limit_mib: u64,
    },
    /// A sum of values does not fit in 64 bits.
    #[error(
        "{path}: the sum of its `{sample_type}` values overflows a 64-bit integer ({what}); the profile is \
         damaged or forged, so no share computed from it would be right"
    )]
    Overflow {
        /// The file whose values pushed the sum over.
        path: PathBuf,
        /// The sample type summed.
        sample_type: String,
        /// Which sum.
        what: &'static str,
    },
    /// A sample does not carry one non-negative value per sample type.
    #[error(
        "{path}: sample {index} {problem}; the profile is malformed (pass --lenient to skip and count such \
         samples)"
    )]
    MalformedSample {
        /// The file.
        path: PathBuf,
        /// 0-based index of the sample in the file.
        index: usize,
        /// What is wrong with it.
        problem: String,
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
    #[error(
        "time `{0}` is neither RFC 3339 (2026-01-31T12:00:00Z), Unix seconds, `now` nor `now-<N><s|m|h|d>` \
         (now-1h)"
    )]
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
    /// The differential flame graph's folded stacks would pass `--max-input-mib`.
    #[error(
        "the flame graph of these profiles would take {mib} MiB of folded stacks (very deep stacks of long \
         names), more than --max-input-mib {limit_mib}; drop --flamegraph or raise the limit"
    )]
    FlameGraphTooLarge {
        /// Bytes the folded lines would take, MiB.
        mib: u64,
        /// The limit.
        limit_mib: u64,
    },
    /// `--per-cpu-second` needs capture durations the profiles do not record.
    #[error(
        "the {side} profile records no capture duration, so --per-cpu-second cannot be used; pass --base-requests/--new-requests or drop the flag"
    )]
    NoDuration {
        /// `base` or `new`.
        side: &'static str,
    },
    /// `--since` is not before `--until`.
    #[error("--since {since} is not before --until {until}: the time range is empty")]
    EmptyRange {
        /// `--since` as given.
        since: String,
        /// `--until` as given.
        until: String,
    },
    /// The backend's URL or the credentials cannot be used to build a client.
    #[error("cannot query {backend} at {url}: {reason}")]
    Backend {
        /// `Pyroscope` or `Parca`.
        backend: &'static str,
        /// The URL as given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The backend could not be reached, or refused or failed the query.
    #[error(
        "cannot fetch the {side} profile from {backend} at {url} (selector {selector}): {reason}"
    )]
    Fetch {
        /// `base` or `new`.
        side: &'static str,
        /// `Pyroscope` or `Parca`.
        backend: &'static str,
        /// The URL as given.
        url: String,
        /// The selector as given.
        selector: String,
        /// The status and its causes, with advice.
        reason: String,
    },
    /// The backend answered, but with no samples.
    #[error(
        "{backend} at {url} has no {profile_type} samples for the {side} selector {selector} between {} and \
         {}; check the selector's labels, --profile-type and --since/--until",
        range.0,
        range.1
    )]
    NoSamples {
        /// `base` or `new`.
        side: &'static str,
        /// `Pyroscope` or `Parca`.
        backend: &'static str,
        /// The URL as given.
        url: String,
        /// The selector as sent.
        selector: String,
        /// The profile type queried.
        profile_type: String,
        /// `--since` and `--until` as given (boxed: every `Result` of the diff carries this error's size).
        range: Box<(String, String)>,
    },
}

/// Which stream passed the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The bytes of the file as stored.
    Compressed,
    /// The bytes gzip expands them to.
    Decompressed,
}

impl std::fmt::Display for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stream::Compressed => "compressed",
            Stream::Decompressed => "decompressed",
        })
    }
}
