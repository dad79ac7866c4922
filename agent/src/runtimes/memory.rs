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
