//! The running kernel's BTF bytes, as the loader gets them once for every layout it looks up.

use super::BtfError;

/// Where the kernel exposes its own BTF (CONFIG_DEBUG_INFO_BTF=y).
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The running kernel's BTF, read once for every layout the loader looks up (5-6 MB: reading it
/// once per lookup was a tenth of the agent's start). Mapped where the kernel allows it (a private
/// read-only mapping of the kernel's own pages): the 5 MB copy into the heap and its page faults were
/// ~5% of a short recording's CPU. Read where mapping is refused (older kernels).
pub(crate) fn read_vmlinux() -> Result<KernelBtf, BtfError> {
    let unreadable = |source| BtfError::Unreadable {
        path: VMLINUX_BTF.into(),
        source,
    };
    let file = std::fs::File::open(VMLINUX_BTF).map_err(unreadable)?;
    // SAFETY: the kernel's BTF does not change while it runs; the mapping is private and read-only.
    if let Ok(map) = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) } {
        return Ok(KernelBtf::Mapped(map));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(unreadable)?;
    Ok(KernelBtf::Read(bytes))
}

/// The kernel's BTF bytes, mapped or read.
pub(crate) enum KernelBtf {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for KernelBtf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Read(bytes) => bytes,
        }
    }
}
