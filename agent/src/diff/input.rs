//! Opens and reads the inputs of `sonde diff` within fixed limits, whatever they turn out to be.
//!
//! `sonde diff` gates releases in CI on profiles that came from anywhere, so an input is hostile until
//! read: only regular files (and `-`, standard input) are accepted, checked on the path before opening
//! and again on the open descriptor (a FIFO or device swapped in between is still refused, and a FIFO
//! without a writer never blocks, as the open is non-blocking). Compressed and decompressed bytes are
//! both counted as they are read, and reading stops the moment either passes the limit, so a gzip bomb
//! costs at most the limit in memory.

use std::{
    fs::{File, Metadata},
    io::{self, Read},
    os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use flate2::read::MultiGzDecoder;

use super::error::{DiffError, Stream};

/// The path that stands for standard input.
pub const STDIN: &str = "-";

/// How standard input is named in messages.
const STDIN_SHOWN: &str = "<stdin>";

/// `path` as messages name it.
pub fn shown(path: &Path) -> &Path {
    if path.as_os_str() == STDIN {
        Path::new(STDIN_SHOWN)
    } else {
        path
    }
}

/// Bytes in a MiB, for the limits given in MiB.
const MIB: u64 = 1 << 20;

/// How much of an input `sonde diff` reads and decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest input in MiB: compressed bytes read, decompressed bytes, and the memory its tables decode
    /// to, each on its own (`--max-input-mib`).
    pub max_input_mib: u64,
}

impl Limits {
    /// The default of `--max-input-mib`: far above a real profile (a million samples is ~30 MiB).
    pub const DEFAULT_MAX_INPUT_MIB: u64 = 512;

    /// The limit in bytes.
    pub fn max_input_bytes(self) -> u64 {
        self.max_input_mib.saturating_mul(MIB)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_mib: Self::DEFAULT_MAX_INPUT_MIB,
        }
    }
}

/// Reads `path` (`-` for standard input) and returns its decompressed gzip content.
pub fn read_gzip(path: &Path, limits: Limits) -> Result<Vec<u8>, DiffError> {
    let raw = read_raw(path, limits)?;
    gunzip(shown(path), &raw, limits)
}

/// Whether `bytes` start like a gzip stream (a protobuf message never does: 0x1f is no valid tag).
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Decompresses the gzip bytes `raw` of the input named `path`, within the limit.
pub fn gunzip(path: &Path, raw: &[u8], limits: Limits) -> Result<Vec<u8>, DiffError> {
    if !is_gzip(raw) {
        return Err(DiffError::NotGzip {
            path: path.to_owned(),
        });
    }
    let limit = limits.max_input_bytes();
    // The gzip trailer holds the decompressed size (mod 4 GiB) of the last member: presize with it, so a
    // large profile is not copied by repeated growth. It is the file's word only, so never beyond the limit.
    let isize = raw
        .len()
        .checked_sub(4)
        .map(|at| u32::from_le_bytes(raw[at..].try_into().expect("4 bytes")));
    let presize = isize.map_or(raw.len().saturating_mul(4), |n| n as usize + 1);
    let mut bytes = Vec::with_capacity(presize.min(limit as usize + 1));
    let mut decoder = Bounded::new(MultiGzDecoder::new(raw), limit);
    decoder
        .read_to_end(&mut bytes)
        .map_err(|source| match over_limit(&source) {
            true => too_large(path, Stream::Decompressed, limits),
            false => DiffError::CorruptGzip {
                path: path.to_owned(),
                source,
            },
        })?;
    Ok(bytes)
}

/// Reads a text file (the data directory's index) within the limit.
pub fn read_text(path: &Path, limits: Limits) -> Result<String, DiffError> {
    let bytes = read_raw(path, limits)?;
    String::from_utf8(bytes).map_err(|e| DiffError::Read {
        path: path.to_owned(),
        source: io::Error::new(io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

/// The bytes of `path` as stored, at most the limit.
fn read_raw(path: &Path, limits: Limits) -> Result<Vec<u8>, DiffError> {
    let read_err = |source| DiffError::Read {
        path: shown(path).to_owned(),
        source,
    };
    let limit = limits.max_input_bytes();
    let (reader, size): (Box<dyn Read>, Option<u64>) = if path.as_os_str() == STDIN {
        (Box::new(io::stdin().lock()), None)
    } else {
        let file = open_regular(path)?;
        let size = file.metadata().map_err(read_err)?.len();
        (Box::new(file), Some(size))
    };
    if size.is_some_and(|s| s > limit) {
        return Err(too_large(shown(path), Stream::Compressed, limits));
    }
    let mut raw = Vec::with_capacity(size.unwrap_or(0) as usize);
    Bounded::new(reader, limit)
        .read_to_end(&mut raw)
        .map_err(|source| match over_limit(&source) {
            true => too_large(shown(path), Stream::Compressed, limits),
            false => read_err(source),
        })?;
    Ok(raw)
}

/// Opens `path` for reading if it is a regular file: refused by its metadata before the open (so a
/// device is never opened), and again on the descriptor (in case the path changed in between).
fn open_regular(path: &Path) -> Result<File, DiffError> {
    let read_err = |source| DiffError::Read {
        path: path.to_owned(),
        source,
    };
    check_regular(path, &std::fs::metadata(path).map_err(read_err)?)?;
    // O_NONBLOCK: opening a FIFO that appeared since the check must not wait for a writer. It changes
    // nothing for a regular file.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(read_err)?;
    check_regular(path, &file.metadata().map_err(read_err)?)?;
    Ok(file)
}

fn check_regular(path: &Path, metadata: &Metadata) -> Result<(), DiffError> {
    let ty = metadata.file_type();
    let kind = if ty.is_file() {
        return Ok(());
    } else if ty.is_dir() {
        "a directory"
    } else if ty.is_fifo() {
        "a FIFO"
    } else if ty.is_char_device() {
        "a character device"
    } else if ty.is_block_device() {
        "a block device"
    } else if ty.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(DiffError::NotRegularFile {
        path: path.to_owned(),
        kind,
    })
}

fn too_large(path: &Path, stream: Stream, limits: Limits) -> DiffError {
    DiffError::TooLarge {
        path: PathBuf::from(path),
        stream,
        limit_mib: limits.max_input_mib,
    }
}

/// The error [`Bounded`] returns past its limit.
#[derive(Debug, thiserror::Error)]
#[error("input limit reached")]
struct LimitReached;

fn over_limit(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|e| e.is::<LimitReached>())
}

/// A reader that fails with [`LimitReached`] as soon as more than `limit` bytes have come through, without
/// reading further than one buffer past it.
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Bounded<R> {
    fn new(inner: R, limit: u64) -> Self {
        Self { inner, left: limit }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Ask for one byte more than allowed: getting it proves the input is over the limit.
        let want = buf.len().min(self.left.saturating_add(1) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n as u64 > self.left {
            return Err(io::Error::other(LimitReached));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_reader_stops_one_byte_past_the_limit() {
        let mut out = Vec::new();
        let err = Bounded::new(io::repeat(7), 1000)
            .read_to_end(&mut out)
            .unwrap_err();
        assert!(over_limit(&err));
        assert!(out.len() <= 1000, "{}", out.len());
        let mut exact = Vec::new();
        Bounded::new(&[1u8; 1000][..], 1000)
            .read_to_end(&mut exact)
            .unwrap();
        assert_eq!(exact.len(), 1000);
    }

    #[test]
    fn only_regular_files_are_opened() {
        assert!(matches!(
            open_regular(Path::new("/dev/null")),
            Err(DiffError::NotRegularFile {
                kind: "a character device",
                ..
            })
        ));
        assert!(matches!(
            open_regular(Path::new("/")),
            Err(DiffError::NotRegularFile {
                kind: "a directory",
                ..
            })
        ));
    }
}
