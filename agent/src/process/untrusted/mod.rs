//! Files read on behalf of a profiled process: its perf map, the debug files its binaries name, and the
//! binaries it maps. The process chooses these paths and can make them anything (a symlink to a
//! root-only file, a FIFO that blocks an `open`, a device, a file on a FUSE mount it serves itself), and
//! sonde runs as root. So every such file is opened the same way:
//! 1. `openat2` from the process's root (`/proc/PID/root`, or the host's `/` once the process is gone)
//!    with `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS`, and `RESOLVE_NO_SYMLINKS` where the input never is
//!    a link (perf maps), as `O_PATH`: resolving a name neither opens a device nor waits on a FIFO;
//! 2. `fstat`/`fstatfs` on that handle: a regular file, not on FUSE, within the input's size bound,
//!    readable by the process's own user by its mode bits (and, for perf maps, owned by that user or
//!    root, perf's rule);
//! 3. only then reopened for reading through `/proc/self/fd`, the same inode, `O_NONBLOCK`.
//!
//! Every refusal is counted by input and reason ([`refusals`]). The mode-bit check stands for "could
//! the process's user read it"; it does not evaluate ACLs nor the search permission of the directories
//! on the way (documented in THREAT_MODEL.md).

mod owner;
pub(crate) mod refusals;

use std::{
    fs::File,
    io,
    os::fd::{AsFd, AsRawFd as _, OwnedFd},
    path::Path,
};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

pub(crate) use owner::Owner;
pub(crate) use refusals::{Input, Reason};

/// `FUSE_SUPER_MAGIC` (linux/magic.h): a FUSE file system's `f_type`.
const FUSE_SUPER_MAGIC: rustix::fs::FsWord = 0x6573_5546;

/// How one kind of input may be opened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// What is being opened (for the counters).
    pub input: Input,
    /// Whether symbolic links are followed (always inside the process's root); refused when false.
    pub symlinks: bool,
    /// Whether the file must be owned by the process's user or root.
    pub owned: bool,
    /// Whether the process's own user must be able to read it (not for the files it maps: the
    /// kernel already opened those for it).
    pub user_readable: bool,
    /// Largest file accepted, in bytes.
    pub max_bytes: u64,
}

/// Why a file was not opened.
#[derive(Debug)]
pub(crate) enum Refused {
    /// There is no such file (not counted: the common case for optional files).
    Absent,
    /// Refused by a rule (counted).
    Rule(Reason),
    /// Opening or inspecting it failed otherwise.
    Io(io::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Absent => write!(f, "no such file"),
            Refused::Rule(reason) => write!(f, "refused ({})", reason.as_str()),
            Refused::Io(err) => write!(f, "{err}"),
        }
    }
}

/// Opens `path` (absolute as the process sees it) inside `root` on behalf of the process whose
/// credentials are `owner` (unknown: only root-owned, world-readable files pass the user checks).
pub(crate) fn open_in_root(
    root: &Path,
    path: &Path,
    owner: Option<&Owner>,
    rules: Rules,
) -> Result<File, Refused> {
    let root = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Refused::Io(e.into()))?;
    let relative = path.strip_prefix("/").unwrap_or(path);
    let mut resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    // Without O_NOFOLLOW: with O_PATH it would hand back the link itself instead of failing.
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    if !rules.symlinks {
        resolve |= ResolveFlags::NO_SYMLINKS;
    }
    let handle = match rustix::fs::openat2(&root, relative, flags, Mode::empty(), resolve) {
        Ok(handle) => handle,
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Err(Refused::Absent),
        Err(rustix::io::Errno::LOOP) if !rules.symlinks => {
            return Err(refuse(rules.input, Reason::Symlink));
        }
        Err(err) => return Err(Refused::Io(err.into())),
    };
    check_and_reopen(handle, rules.user_readable.then_some(owner), rules)
}

/// Opens a path sonde trusts to lead to the file (`/proc/PID/map_files/…`, an operator's debug
/// directory) with the same checks on the file itself, minus the owner rules.
pub(crate) fn open_trusted_path(
    path: &Path,
    input: Input,
    max_bytes: u64,
) -> Result<File, Refused> {
    let handle = match rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(handle) => handle,
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Err(Refused::Absent),
        Err(err) => return Err(Refused::Io(err.into())),
    };
    let rules = Rules {
        input,
        symlinks: true,
        owned: false,
        user_readable: false,
        max_bytes,
    };
    // No owner: the operator's own files and the kernel's links are not the process's to judge.
    check_and_reopen(handle, None, rules)
}

fn refuse(input: Input, reason: Reason) -> Refused {
    refusals::count(input, reason);
    Refused::Rule(reason)
}

/// `on_behalf`: Some(the process's credentials, if known) for a file read on a process's behalf, None
/// for a trusted path.
fn check_and_reopen(
    handle: OwnedFd,
    on_behalf: Option<Option<&Owner>>,
    rules: Rules,
) -> Result<File, Refused> {
    let stat = rustix::fs::fstat(&handle).map_err(|e| Refused::Io(e.into()))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink if !rules.symlinks => return Err(refuse(rules.input, Reason::Symlink)),
        _ => return Err(refuse(rules.input, Reason::NotRegular)),
    }
    let fs = rustix::fs::fstatfs(&handle).map_err(|e| Refused::Io(e.into()))?;
    if fs.f_type == FUSE_SUPER_MAGIC {
        return Err(refuse(rules.input, Reason::Fuse));
    }
    let mode = stat.st_mode & 0o777;
    if let Some(owner) = on_behalf {
        if rules.owned && stat.st_uid != 0 && !owner.is_some_and(|o| o.owns(stat.st_uid)) {
            return Err(refuse(rules.input, Reason::Owner));
        }
        let readable = match owner {
            Some(o) => o.may_read(stat.st_uid, stat.st_gid, mode),
            // Credentials unknown (the process is gone): only what anyone may read.
            None => mode & 0o004 != 0,
        };
        if !readable {
            return Err(refuse(rules.input, Reason::Permission));
        }
    }
    if stat.st_size as u64 > rules.max_bytes {
        return Err(refuse(rules.input, Reason::TooLarge));
    }
    reopen(handle.as_fd()).map_err(Refused::Io)
}

/// The file behind an `O_PATH` handle, opened for reading: the same inode, whatever its name is now.
fn reopen(handle: std::os::fd::BorrowedFd<'_>) -> io::Result<File> {
    let fd = rustix::fs::open(
        format!("/proc/self/fd/{}", handle.as_raw_fd()),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Whether `name` (a `.gnu_debuglink` name, chosen by whoever built the binary) is a plain file name:
/// not empty, no `/`, not `.` or `..`. Counted when it is not.
pub(crate) fn plain_file_name(name: &str) -> bool {
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    if !plain {
        refusals::count(Input::DebugFile, Reason::BadName);
    }
    plain
}

#[cfg(test)]
mod tests;
