//! Anonymous in-memory files: bytes sonde made (the vDSO image, decompressed MiniDebugInfo) become a
//! file that symbolization and unwind tables read like any other, by `/proc/self/fd/N`.

use std::{ffi::CStr, fs::File, io::Write as _, os::fd::FromRawFd as _};

/// A memfd named `name` holding `bytes`.
pub(crate) fn with_bytes(name: &CStr, bytes: &[u8]) -> std::io::Result<File> {
    // SAFETY: a NUL-terminated name and no flags that need more arguments.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor this function owns.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    Ok(file)
}
