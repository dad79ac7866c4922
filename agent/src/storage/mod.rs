//! Files sonde owns on disk (the data directory, the spool, the debuginfod cache), reached only through
//! directory handles.
//!
//! sonde runs as root, and these directories can be reached by others (a hostPath, `/var/lib`). So
//! nothing here follows a path string: each directory is an open `O_DIRECTORY` descriptor, every name
//! is one component opened relative to it with `O_NOFOLLOW`, new files are created with `O_EXCL`, and a
//! directory that is a symlink, belongs to another user or is writable by group or others is refused.
//! Modes are set with `fchmod`, so they hold whatever the umask is.

mod error;
mod mode;
mod safe_dir;

pub(crate) use error::StorageError;

/// Lock file of a data directory: held by the `sonde run` using it, and by `sonde prune`.
pub(crate) const DATA_LOCK: &str = "sonde.lock";
pub(crate) use mode::DataMode;
pub(crate) use safe_dir::{Durability, SafeDir};
