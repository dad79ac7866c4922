//! Opens the file behind an executable mapping of another process, with the least privilege that works:
//! 1. `/proc/PID/map_files/START-END`: the mapped file itself, even when it was deleted or replaced
//!    since (upgrades) or is a memfd; the kernel lets only CAP_CHECKPOINT_RESTORE (Linux 5.9+) or
//!    CAP_SYS_ADMIN open these links;
//! 2. else the mapping's path inside the process's root (`/proc/PID/root/PATH`, so containers' files
//!    are their own), kept only if its device and inode are the mapping's: the path may name another
//!    file by now.
//!
//! Both go through [`untrusted`](super::untrusted): the path in the process's root is its choice (a
//! FIFO or a device put where the binary was would block or act on `open`), so only a regular file off
//! FUSE is opened, and a path that leads elsewhere resolves inside the root.
//!
//! A failure says why in words a user can act on ([`Unopenable`]).

use std::{fmt, fs::File, io, os::unix::fs::MetadataExt as _, path::Path};

use super::{
    MapsLine, maps_file,
    untrusted::{self, Input, Refused},
};

/// No size bound on binaries: they are mapped, never read whole.
const ANY_SIZE: u64 = u64::MAX;

/// Why neither way opened a mapped file.
#[derive(Debug)]
pub(crate) struct Unopenable {
    /// Why `/proc/PID/map_files` did not.
    map_files: io::Error,
    /// Why the path inside the process's root did not.
    by_path: ByPath,
}

#[derive(Debug)]
enum ByPath {
    /// Opening it failed.
    Failed(io::Error),
    /// It is not a file sonde opens on a process's behalf (counted).
    Refused(untrusted::Reason),
    /// It opened, but is not the mapped file.
    AnotherFile,
}

/// Opens the file mapped by `line` in process `pid`.
pub(crate) fn open(pid: u32, line: &MapsLine) -> Result<File, Unopenable> {
    let dir = maps_file::proc_dir(pid);
    let mapped = dir.join(format!("map_files/{:x}-{:x}", line.start, line.end));
    let map_files = match untrusted::open_trusted_path(&mapped, Input::Binary, ANY_SIZE) {
        Ok(file) => return Ok(file),
        Err(Refused::Io(err)) => err,
        Err(Refused::Absent) => io::Error::from_raw_os_error(libc::ENOENT),
        Err(Refused::Rule(reason)) => {
            return Err(Unopenable {
                map_files: io::Error::other(format!("refused ({})", reason.as_str())),
                by_path: ByPath::Refused(reason),
            });
        }
    };
    let rules = untrusted::Rules {
        input: Input::Binary,
        symlinks: true,
        owned: false,
        // The kernel mapped this file for the process: no question of its user reading it.
        user_readable: false,
        max_bytes: ANY_SIZE,
    };
    let opened = untrusted::open_in_root(&dir.join("root"), Path::new(&line.path), None, rules);
    let by_path = match opened
        .map_err(by_path_error)
        .and_then(|f| Ok((f.metadata()?, f)))
    {
        Ok((meta, file)) if (meta.dev(), meta.ino()) == (line.dev, line.inode) => return Ok(file),
        Ok(_) => ByPath::AnotherFile,
        Err(ByPathError::Refused(reason)) => ByPath::Refused(reason),
        Err(ByPathError::Io(err)) => ByPath::Failed(err),
    };
    Err(Unopenable { map_files, by_path })
}

impl Unopenable {
    /// Whether the mapping's range was gone by the time its file was opened: the process changed
    /// its mappings (or finished an exec) since they were read, and a new read sees what it has now.
    pub(crate) fn range_gone(&self) -> bool {
        self.map_files.kind() == io::ErrorKind::NotFound
    }
}

enum ByPathError {
    Refused(untrusted::Reason),
    Io(io::Error),
}

impl From<io::Error> for ByPathError {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

fn by_path_error(refused: Refused) -> ByPathError {
    match refused {
        Refused::Absent => ByPathError::Io(io::Error::from_raw_os_error(libc::ENOENT)),
        Refused::Rule(reason) => ByPathError::Refused(reason),
        Refused::Io(err) => ByPathError::Io(err),
    }
}

impl fmt::Display for Unopenable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.map_files.raw_os_error() {
            Some(libc::EPERM) => write!(
                f,
                "/proc/PID/map_files refused it (EPERM: needs CAP_CHECKPOINT_RESTORE, or CAP_SYS_ADMIN before Linux 5.9)"
            )?,
            Some(libc::EACCES) => write!(
                f,
                "/proc/PID/map_files refused it (EACCES: needs CAP_SYS_PTRACE for another user's process)"
            )?,
            _ => write!(f, "/proc/PID/map_files: {}", self.map_files)?,
        }
        match &self.by_path {
            ByPath::AnotherFile => write!(
                f,
                ", and its path names another file now (replaced since the process mapped it)"
            ),
            ByPath::Failed(err) if err.kind() == io::ErrorKind::NotFound => write!(
                f,
                ", and its path no longer exists (deleted since the process mapped it, or not a file)"
            ),
            ByPath::Failed(err) if maps_file::denied(err) => write!(
                f,
                ", and opening its path was refused ({err}: needs CAP_DAC_READ_SEARCH, and CAP_SYS_PTRACE for another user's /proc/PID/root)"
            ),
            ByPath::Failed(err) => write!(f, ", and opening its path failed: {err}"),
            ByPath::Refused(reason) => write!(
                f,
                ", and its path is not a file sonde opens for a process ({}: see THREAT_MODEL.md)",
                reason.as_str()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_of(path: &std::path::Path) -> MapsLine {
        let (_, lines) = maps_file::read(std::process::id()).expect("own process");
        lines
            .into_iter()
            .find(|l| std::path::Path::new(&l.path) == path)
            .unwrap_or_else(|| panic!("{} is not mapped", path.display()))
    }

    #[test]
    fn opens_this_process_s_own_executable() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let line = line_of(&exe);
        let file = open(std::process::id(), &line).expect("own executable opens");
        let meta = file.metadata().unwrap();
        assert_eq!((meta.dev(), meta.ino()), (line.dev, line.inode));
    }

    #[test]
    fn a_path_naming_another_file_is_not_taken_for_the_mapped_one() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mut line = line_of(&exe);
        // A range that is not mapped (map_files has no such link) and an inode the path does not have.
        line.start = 0x1000;
        line.end = 0x2000;
        line.inode ^= 1;
        let err = open(std::process::id(), &line).unwrap_err();
        assert!(err.to_string().contains("names another file now"), "{err}");
    }

    #[test]
    fn reasons_name_what_to_grant() {
        let err = Unopenable {
            map_files: io::Error::from_raw_os_error(libc::EPERM),
            by_path: ByPath::Failed(io::Error::from_raw_os_error(libc::ENOENT)),
        };
        let text = err.to_string();
        assert!(text.contains("CAP_CHECKPOINT_RESTORE"), "{text}");
        assert!(text.contains("deleted since"), "{text}");
        let err = Unopenable {
            map_files: io::Error::from_raw_os_error(libc::EPERM),
            by_path: ByPath::Failed(io::Error::from_raw_os_error(libc::EACCES)),
        };
        assert!(err.to_string().contains("CAP_DAC_READ_SEARCH"), "{err}");
    }
}
