//! Why a file or directory of sonde's own could not be used.

use std::path::PathBuf;

/// One failed operation on sonde's own files. Every message names the path and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} is a symbolic link; sonde follows no links in its own directories: point the setting at the real directory",
        path.display()
    )]
    Symlink { path: PathBuf },
    #[error("{} is not a {expected}; remove it or choose another directory", path.display())]
    WrongType {
        path: PathBuf,
        expected: &'static str,
    },
    #[error(
        "{} belongs to uid {owner}, not to sonde's user (uid {me}); `chown {me} {}` it or choose another directory",
        path.display(), path.display()
    )]
    ForeignOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "{} is writable by {who} (mode {mode:04o}); `chmod go-w {}` it or choose another directory",
        path.display(), path.display()
    )]
    Writable {
        path: PathBuf,
        who: &'static str,
        mode: u32,
    },
    #[error("{name:?} is not a plain file name inside {}", dir.display())]
    BadName { dir: PathBuf, name: String },
    #[error("{} already exists", path.display())]
    AlreadyExists { path: PathBuf },
    #[error("{} is larger than {max} bytes", path.display())]
    TooLarge { path: PathBuf, max: u64 },
    #[error("{}: wrote {written} of {len} bytes (disk full?)", path.display())]
    ShortWrite {
        path: PathBuf,
        written: usize,
        len: usize,
    },
}

impl StorageError {
    /// True when a name was already taken (the caller picks another).
    pub(crate) fn is_already_exists(&self) -> bool {
        matches!(self, Self::AlreadyExists { .. })
    }
}
