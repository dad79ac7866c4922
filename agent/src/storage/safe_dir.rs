//! [`SafeDir`]: a directory of sonde's own, held open, in which every operation is one `*at` call on a
//! single name with `O_NOFOLLOW`.

use std::{
    ffi::OsStr,
    fs::File,
    io::{Read as _, Write as _},
    os::fd::{AsFd, OwnedFd},
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use rustix::{
    fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags},
    io::Errno,
};

use super::{DataMode, StorageError};

/// An open directory that sonde owns and that nobody else can write: checked once when opened, then
/// reached only through its descriptor, so renaming or replacing the path later changes nothing.
#[derive(Clone, Debug)]
pub(crate) struct SafeDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
    mode: DataMode,
}

/// One name in a [`SafeDir`], as `lstat` sees it.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) is_dir: bool,
    pub(crate) is_file: bool,
    pub(crate) len: u64,
    pub(crate) modified: SystemTime,
}

/// Temporary names are unique within the process, so two writers of one name never share one.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
// O_NONBLOCK: a FIFO planted under a file's name must not hang the writer; regular files ignore it.
const FILE_FLAGS: OFlags = OFlags::NOFOLLOW
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK);

impl SafeDir {
    /// Opens (creating if missing) the directory at `path`. Its ancestors are the operator's choice and
    /// are created as ordinary directories; the last component itself must not be a symlink, must
    /// belong to sonde's user and must not be writable by group or others.
    pub(crate) fn open_root(path: &Path, mode: DataMode) -> Result<Self, StorageError> {
        let Some(name) = path.file_name() else {
            // "/" or a path ending in "..": no parent to open it from, so open it as it is.
            let fd = rfs::open(path, DIR_FLAGS, Mode::empty()).map_err(|e| io_err(path, e))?;
            return Self::checked(fd, path.to_owned(), mode);
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(parent).map_err(|source| StorageError::Io {
            path: parent.to_owned(),
            source,
        })?;
        let parent_fd = rfs::open(
            parent,
            DIR_FLAGS.difference(OFlags::NOFOLLOW),
            Mode::empty(),
        )
        .map_err(|e| io_err(parent, e))?;
        Self::open_child(&parent_fd, name, path.to_owned(), mode)
    }

    /// The subdirectory `name` (one component), created if missing, with the same checks.
    pub(crate) fn subdir(&self, name: &str) -> Result<Self, StorageError> {
        self.check_name(name)?;
        Self::open_child(&self.fd, OsStr::new(name), self.path.join(name), self.mode)
    }

    /// The subdirectory `name` if it exists, with the same checks; never creates it.
    pub(crate) fn existing_subdir(&self, name: &str) -> Result<Option<Self>, StorageError> {
        if !self.exists(name)? {
            return Ok(None);
        }
        self.subdir(name).map(Some)
    }

    fn open_child(
        parent: &OwnedFd,
        name: &OsStr,
        path: PathBuf,
        mode: DataMode,
    ) -> Result<Self, StorageError> {
        let created = match rfs::mkdirat(parent, name, Mode::from_raw_mode(mode.dir())) {
            Ok(()) => true,
            Err(Errno::EXIST) => false,
            Err(e) => return Err(io_err(&path, e)),
        };
        let fd = match rfs::openat(parent, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                return Err(kind_error(parent, name, path, "directory"));
            }
            Err(e) => return Err(io_err(&path, e)),
        };
        if created {
            // mkdir's mode went through the umask.
            rfs::fchmod(&fd, Mode::from_raw_mode(mode.dir())).map_err(|e| io_err(&path, e))?;
        }
        Self::checked(fd, path, mode)
    }

    fn checked(fd: OwnedFd, path: PathBuf, mode: DataMode) -> Result<Self, StorageError> {
        let st = rfs::fstat(&fd).map_err(|e| io_err(&path, e))?;
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(StorageError::ForeignOwner {
                path,
                owner: st.st_uid,
                me,
            });
        }
        let bits = st.st_mode & 0o7777;
        let who = match (bits & 0o020 != 0, bits & 0o002 != 0) {
            (true, true) => Some("group and others"),
            (true, false) => Some("the group"),
            (false, true) => Some("others"),
            (false, false) => None,
        };
        if let Some(who) = who {
            return Err(StorageError::Writable {
                path,
                who,
                mode: bits,
            });
        }
        if bits & !mode.dir() != 0 {
            // Ours, and wider than the data mode (made by an older sonde, or by hand): narrowed, since
            // what is inside is only as private as the directory.
            rfs::fchmod(&fd, Mode::from_raw_mode(mode.dir())).map_err(|e| io_err(&path, e))?;
            tracing::info!(path = %path.display(), from = format_args!("{bits:04o}"),
                to = format_args!("{:04o}", mode.dir()), "narrowed the mode of sonde's directory");
        }
        Ok(Self {
            fd: Arc::new(fd),
            path,
            mode,
        })
    }

    /// The path this directory was opened as (for messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn check_name(&self, name: &str) -> Result<(), StorageError> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(StorageError::BadName {
                dir: self.path.clone(),
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// Bytes an unprivileged writer may still use on this directory's file system, and its size.
    pub(crate) fn space(&self) -> Result<(u64, u64), StorageError> {
        let st = rfs::fstatvfs(&*self.fd).map_err(|e| io_err(&self.path, e))?;
        Ok((
            st.f_bavail.saturating_mul(st.f_frsize),
            st.f_blocks.saturating_mul(st.f_frsize),
        ))
    }

    /// Whether `name` exists (as anything; a symlink is not followed).
    pub(crate) fn exists(&self, name: &str) -> Result<bool, StorageError> {
        self.check_name(name)?;
        match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(&self.path.join(name), e)),
        }
    }

    /// A new file that becomes `name` only when committed: written under a fresh temporary name made
    /// with `O_EXCL`, so nothing planted under that name (a symlink to a root file) is opened.
    pub(crate) fn create_new(&self, name: &str) -> Result<NewFile, StorageError> {
        self.check_name(name)?;
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = format!(".{name}.{}-{seq}.tmp", std::process::id());
        // Read-write: a writer may check what it wrote (the debuginfod cache parses the ELF) before commit.
        let flags = FILE_FLAGS | OFlags::RDWR | OFlags::CREATE | OFlags::EXCL;
        let mode = Mode::from_raw_mode(self.mode.file());
        let fd = match rfs::openat(&self.fd, tmp.as_str(), flags, mode) {
            Err(Errno::EXIST) => {
                // Left by a crash, or planted: the name is removed (a link, not its target) and made again.
                tracing::warn!(path = %self.path.join(&tmp).display(), "removed a file in the way of a temporary file");
                self.remove(&tmp)?;
                rfs::openat(&self.fd, tmp.as_str(), flags, mode)
            }
            other => other,
        }
        .map_err(|e| io_err(&self.path.join(&tmp), e))?;
        rfs::fchmod(&fd, mode).map_err(|e| io_err(&self.path.join(&tmp), e))?;
        Ok(NewFile {
            dir: self.clone(),
            name: name.to_owned(),
            tmp,
            file: Some(File::from(fd)),
        })
    }

    /// Writes `bytes` as the new file `name`, durably; [`StorageError::AlreadyExists`] if it exists.
    pub(crate) fn write_new(&self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.write_new_with(name, bytes, Durability::Now)
    }

    fn write_new_with(
        &self,
        name: &str,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<(), StorageError> {
        let mut file = self.create_new(name)?;
        file.write_all(bytes)?;
        file.finish(false, durability)
    }

    /// Writes `bytes` as the new file `<stem><ext>`, or `<stem>-<n><ext>` when that name is taken (a
    /// second window in the same second); returns the name used. With [`Durability::Batch`] the file
    /// is durable only after [`SafeDir::sync_filesystem`].
    pub(crate) fn write_unique(
        &self,
        stem: &str,
        ext: &str,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<String, StorageError> {
        let mut name = format!("{stem}{ext}");
        for n in 1.. {
            match self.write_new_with(&name, bytes, durability) {
                Err(e) if e.is_already_exists() && n < 1000 => name = format!("{stem}-{n}{ext}"),
                other => return other.map(|()| name),
            }
        }
        unreachable!("the loop returns by its 1000th name")
    }

    /// Appends `bytes` to `name` (created if missing) on an `O_APPEND` descriptor. A failed write is
    /// truncated back, so the file holds whole records or none.
    pub(crate) fn append(&self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.check_name(name)?;
        let path = self.path.join(name);
        let flags = FILE_FLAGS | OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE;
        let fd = rfs::openat(&self.fd, name, flags, Mode::from_raw_mode(self.mode.file()))
            .map_err(|e| open_err(&self.fd, name, &path, e))?;
        let before = self.check_own_file(&fd, &path)?;
        // A short write goes on with the rest (the kernel may stop early, say on a signal); the write
        // that then fails says why (a full disk: ENOSPC), which the short count alone does not.
        let mut written = 0;
        let result = loop {
            match rustix::io::write(&fd, &bytes[written..]) {
                Ok(n) if written + n == bytes.len() => break Ok(()),
                Ok(0) => {
                    break Err(StorageError::ShortWrite {
                        path,
                        written,
                        len: bytes.len(),
                    });
                }
                Ok(n) => written += n,
                Err(e) => break Err(io_err(&path, e)),
            }
        };
        if result.is_err() {
            // Best effort: the write already failed, and this is what keeps the file parseable.
            let _ = rfs::ftruncate(&fd, before);
        }
        result
    }

    /// Cuts `name` back to `len` bytes.
    pub(crate) fn truncate(&self, name: &str, len: u64) -> Result<(), StorageError> {
        let path = self.path.join(name);
        let file = self.open_file(name, OFlags::WRONLY)?;
        rfs::ftruncate(&file, len).map_err(|e| io_err(&path, e))
    }

    /// Opens the regular file `name` for reading.
    pub(crate) fn open_read(&self, name: &str) -> Result<File, StorageError> {
        self.open_file(name, OFlags::RDONLY)
    }

    /// The whole of `name`, refused past `max_bytes`.
    pub(crate) fn read(&self, name: &str, max_bytes: u64) -> Result<Vec<u8>, StorageError> {
        let path = self.path.join(name);
        let file = self.open_read(name)?;
        let mut out = Vec::new();
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|source| StorageError::Io {
                path: path.clone(),
                source,
            })?;
        if out.len() as u64 > max_bytes {
            return Err(StorageError::TooLarge {
                path,
                max: max_bytes,
            });
        }
        Ok(out)
    }

    fn open_file(&self, name: &str, access: OFlags) -> Result<File, StorageError> {
        self.check_name(name)?;
        let path = self.path.join(name);
        let fd = rfs::openat(&self.fd, name, FILE_FLAGS | access, Mode::empty())
            .map_err(|e| open_err(&self.fd, name, &path, e))?;
        self.check_own_file(&fd, &path)?;
        Ok(File::from(fd))
    }

    /// A regular file of sonde's user (one a writer may extend); returns its length.
    fn check_own_file(&self, fd: &OwnedFd, path: &Path) -> Result<u64, StorageError> {
        let st = rfs::fstat(fd).map_err(|e| io_err(path, e))?;
        if !FileType::from_raw_mode(st.st_mode).is_file() {
            return Err(StorageError::WrongType {
                path: path.to_owned(),
                expected: "regular file",
            });
        }
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            return Err(StorageError::ForeignOwner {
                path: path.to_owned(),
                owner: st.st_uid,
                me,
            });
        }
        Ok(u64::try_from(st.st_size).unwrap_or(0))
    }

    /// Removes the name `name` (a file or a link; never what a link points to).
    pub(crate) fn remove(&self, name: &str) -> Result<(), StorageError> {
        self.check_name(name)?;
        rfs::unlinkat(&self.fd, name, AtFlags::empty())
            .map_err(|e| io_err(&self.path.join(name), e))
    }

    /// Renames `from` to `to` inside this directory, replacing `to`.
    pub(crate) fn rename(&self, from: &str, to: &str) -> Result<(), StorageError> {
        self.check_name(from)?;
        self.check_name(to)?;
        rfs::renameat(&self.fd, from, &self.fd, to).map_err(|e| io_err(&self.path.join(to), e))
    }

    /// Removes the empty subdirectory `name`.
    pub(crate) fn remove_dir(&self, name: &str) -> Result<(), StorageError> {
        self.check_name(name)?;
        rfs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)
            .map_err(|e| io_err(&self.path.join(name), e))
    }

    /// Takes an exclusive lock on the file `name` (created if missing), held while the returned file
    /// is open; `None` when another process holds it.
    pub(crate) fn try_lock(&self, name: &str) -> Result<Option<File>, StorageError> {
        self.check_name(name)?;
        let path = self.path.join(name);
        let flags = FILE_FLAGS | OFlags::RDWR | OFlags::CREATE;
        let fd = rfs::openat(&self.fd, name, flags, Mode::from_raw_mode(self.mode.file()))
            .map_err(|e| open_err(&self.fd, name, &path, e))?;
        self.check_own_file(&fd, &path)?;
        match rfs::flock(&fd, rfs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(File::from(fd))),
            Err(Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(io_err(&path, e)),
        }
    }

    /// Every name in the directory except `.` and `..`, unsorted. Names that are not UTF-8 were not
    /// written by sonde and are left out.
    pub(crate) fn entries(&self) -> Result<Vec<Entry>, StorageError> {
        let dir = rfs::Dir::read_from(&self.fd).map_err(|e| io_err(&self.path, e))?;
        let mut out = Vec::new();
        for item in dir {
            let item = item.map_err(|e| io_err(&self.path, e))?;
            let Ok(name) = item.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let st = match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(io_err(&self.path.join(name), e)),
            };
            let kind = FileType::from_raw_mode(st.st_mode);
            let modified = SystemTime::UNIX_EPOCH
                + Duration::new(
                    u64::try_from(st.st_mtime).unwrap_or(0),
                    u32::try_from(st.st_mtime_nsec).unwrap_or(0),
                );
            out.push(Entry {
                name: name.to_owned(),
                is_dir: kind.is_dir(),
                is_file: kind.is_file(),
                len: u64::try_from(st.st_size).unwrap_or(0),
                modified,
            });
        }
        Ok(out)
    }

    /// Removes the temporary files a crash left behind (`.<name>.tmp` and `.<name>.<n>.tmp`); returns
    /// how many.
    pub(crate) fn remove_temp_files(&self) -> Result<usize, StorageError> {
        let mut removed = 0;
        for e in self.entries()? {
            if !e.is_dir && e.name.starts_with('.') && e.name.ends_with(".tmp") {
                self.remove(&e.name)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn sync(&self) -> Result<(), StorageError> {
        rfs::fsync(&self.fd).map_err(|e| io_err(&self.path, e))
    }

    /// Makes every file written (and renamed) on this directory's file system durable at once
    /// (`syncfs`): the end of a batch of [`Durability::Batch`] writes. One flush for the batch where
    /// each file's own `fsync` and its directory's cost one each: with a thousand profiles a window,
    /// those flushes were most of the daemon's CPU (each a virtio notification in a VM).
    pub(crate) fn sync_filesystem(&self) -> Result<(), StorageError> {
        rfs::syncfs(&self.fd).map_err(|e| io_err(&self.path, e))
    }
}

/// When a written file reaches the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Before the write returns: the file and its directory entry are synced.
    Now,
    /// With the batch it belongs to, by [`SafeDir::sync_filesystem`]; nothing may point at it before.
    Batch,
}

/// A file being written by [`SafeDir::create_new`]; removed unless committed.
pub(crate) struct NewFile {
    dir: SafeDir,
    name: String,
    tmp: String,
    file: Option<File>,
}

impl NewFile {
    /// The open file, to write into.
    pub(crate) fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("a NewFile's file is taken only by commit")
    }

    /// Writes all of `bytes`.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        let path = self.dir.path.join(&self.tmp);
        self.file()
            .write_all(bytes)
            .map_err(|source| StorageError::Io { path, source })
    }

    /// Makes the file durable and gives it its name. With `replace` false, an existing `name` is an
    /// [`StorageError::AlreadyExists`] and is left as it was.
    pub(crate) fn commit(self, replace: bool) -> Result<(), StorageError> {
        self.finish(replace, Durability::Now)
    }

    fn finish(mut self, replace: bool, durability: Durability) -> Result<(), StorageError> {
        let file = self.file.take().expect("committed once");
        let target = self.dir.path.join(&self.name);
        if durability == Durability::Now {
            file.sync_all().map_err(|source| StorageError::Io {
                path: self.dir.path.join(&self.tmp),
                source,
            })?;
        }
        drop(file);
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        let fd = &self.dir.fd;
        match rfs::renameat_with(fd, self.tmp.as_str(), fd, self.name.as_str(), flags) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(StorageError::AlreadyExists { path: target }),
            Err(e) => return Err(io_err(&target, e)),
        }
        self.tmp.clear();
        // The rename itself survives a crash only once the directory is synced.
        match durability {
            Durability::Now => self.dir.sync(),
            Durability::Batch => Ok(()),
        }
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if !self.tmp.is_empty() {
            let _ = rfs::unlinkat(&self.dir.fd, self.tmp.as_str(), AtFlags::empty());
        }
    }
}

fn io_err(path: &Path, e: Errno) -> StorageError {
    StorageError::Io {
        path: path.to_owned(),
        source: e.into(),
    }
}

/// Names why `openat(... O_NOFOLLOW)` of a file failed: a symlink and a directory get their own errors.
fn open_err(dir: &OwnedFd, name: &str, path: &Path, e: Errno) -> StorageError {
    match e {
        Errno::LOOP | Errno::ISDIR | Errno::NXIO => {
            kind_error(dir, OsStr::new(name), path.to_owned(), "regular file")
        }
        e => io_err(path, e),
    }
}

fn kind_error(
    parent: &impl AsFd,
    name: &OsStr,
    path: PathBuf,
    expected: &'static str,
) -> StorageError {
    match rfs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            StorageError::Symlink { path }
        }
        Ok(_) => StorageError::WrongType { path, expected },
        Err(e) => io_err(&path, e),
    }
}

#[cfg(test)]
mod tests;
