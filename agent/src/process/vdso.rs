//! The vDSO as a binary: every 64-bit process of this kernel maps the same image, so this process's
//! copy, put in a memfd, stands for all of them. Symbolization and unwind tables then read it like any
//! other file.

use std::{os::unix::fs::MetadataExt as _, sync::Arc};

use super::{Binary, ElfInfo, maps_file, memfd};

/// The `[vdso]` pseudo path of `/proc/PID/maps`.
pub(crate) const VDSO_PATH: &str = "[vdso]";

/// This process's vDSO image in a memfd, as a [`Binary`].
pub(crate) fn binary() -> std::io::Result<Arc<Binary>> {
    let image = image()?;
    let file = memfd::with_bytes(c"sonde-vdso", &image)?;
    let meta = file.metadata()?;
    Ok(Arc::new(Binary {
        id: (meta.dev(), meta.ino()),
        path: VDSO_PATH.to_owned(),
        elf: ElfInfo::parse(&image),
        file,
        root: "/".into(),
        owner: None,
        facts: Vec::new(),
    }))
}

/// The bytes of this process's vDSO.
fn image() -> std::io::Result<Vec<u8>> {
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let (_, lines) = maps_file::read(std::process::id())
        .map_err(|_| std::io::Error::other("cannot read this process's mappings"))?;
    let vdso = lines
        .iter()
        .find(|l| l.start == base && l.path == VDSO_PATH)
        .ok_or_else(|| std::io::Error::other("no [vdso] mapping in this process"))?;
    let len = (vdso.end - vdso.start) as usize;
    // SAFETY: the kernel maps the vDSO readable for the whole life of the process.
    Ok(unsafe { std::slice::from_raw_parts(base as *const u8, len) }.to_vec())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_vdso_is_an_elf_with_a_build_id() {
        let vdso = super::binary().expect("this process has a vDSO");
        let bytes = std::fs::read(vdso.open_path()).unwrap();
        assert_eq!(&bytes[..4], b"\x7fELF");
        assert!(vdso.build_id().is_some(), "the vDSO has a build id");
    }
}
