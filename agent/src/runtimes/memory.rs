//! Reads another process's memory with `process_vm_readv` (CAP_SYS_PTRACE, already in sonde's set for
//! `/proc/PID/mem`-like access): one syscall per read, no ptrace stop, and a fault is an error rather than
//! a signal. Shared by the runtimes that read their structures out of the profiled process (CPython's
//! code objects, HotSpot's VMStructs, methods and compiled code).

use std::io;

/// The memory of one process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcessMemory {
    pid: u32,
}

impl ProcessMemory {
    pub(crate) fn new(pid: u32) -> Self {
        Self { pid }
    }

    /// Fills `buf` from `addr`; a short read (the range crosses into unmapped memory) is an error.
    pub(crate) fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, which outlives the call; `remote` is only read by the kernel,
        // in the other process, and any fault there is reported as an error.
        let n =
            unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        match n {
            n if n < 0 => Err(io::Error::last_os_error()),
            n if n as usize == buf.len() => Ok(()),
            n => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("read {n} of {} bytes at {addr:#x}", buf.len()),
            )),
        }
    }

    /// A little-endian u64 at `addr`.
    pub(crate) fn u64(&self, addr: u64) -> io::Result<u64> {
        let mut b = [0; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Where an object of the process is read from: its memory now, or a copy the kernel took of it.
pub(crate) trait Memory {
    /// Fills `buf` from `addr`; what cannot be read whole is an error.
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl Memory for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        ProcessMemory::read(self, addr, buf)
    }
}

/// Bytes of a process's memory from `base`, as the kernel copied them while a sample ran: an object
/// that may be freed, or its process gone, since.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Copied<'a> {
    pub(crate) base: u64,
    pub(crate) bytes: &'a [u8],
}

impl Memory for Copied<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let copied = addr
            .checked_sub(self.base)
            .and_then(|off| usize::try_from(off).ok())
            .and_then(|off| self.bytes.get(off..off.checked_add(buf.len())?));
        let copied = copied.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{} bytes at {addr:#x} are outside the {} the kernel copied from {:#x}",
                    buf.len(),
                    self.bytes.len(),
                    self.base
                ),
            )
        })?;
        buf.copy_from_slice(copied);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy answers for the bytes it holds only: a read that starts before it or runs past its end
    /// is an error, not a short or shifted answer.
    #[test]
    fn a_copy_reads_what_it_holds_only() {
        let bytes: Vec<u8> = (0..16).collect();
        let copy = Copied {
            base: 0x1000,
            bytes: &bytes,
        };
        let mut buf = [0u8; 4];
        copy.read(0x100c, &mut buf).unwrap();
        assert_eq!(buf, [12, 13, 14, 15]);
        assert!(copy.read(0x100d, &mut buf).is_err(), "past its end");
        assert!(copy.read(0xfff, &mut buf).is_err(), "before its start");
        assert!(copy.read(u64::MAX, &mut buf).is_err(), "far past it");
        copy.read(0x1010, &mut []).unwrap();
    }
}
