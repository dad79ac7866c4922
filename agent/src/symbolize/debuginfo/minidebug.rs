//! MiniDebugInfo (Fedora, RHEL, CentOS): a stripped binary carries `.gnu_debugdata`, an xz-compressed
//! ELF holding the symbols of the functions `.dynsym` does not export. It is decompressed in-process
//! (pure Rust, bounded in size) into a memfd that blazesym reads like any debug file; the binary's own
//! `.dynsym` still answers for exported functions.

use std::io::Write;

use object::{Object as _, ObjectSection as _};

use crate::process::{Binary, ElfInfo, memfd};

/// Largest decompressed MiniDebugInfo accepted: real ones are a few MiB at most; a section that
/// inflates beyond this is hostile or broken, and is refused rather than filling memory.
const MAX_DECOMPRESSED: usize = 64 << 20;

/// Why `.gnu_debugdata` could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MiniDebugError {
    /// The binary could not be mapped or parsed.
    #[error("cannot read the binary: {0}")]
    Read(String),
    /// No such section.
    #[error("no .gnu_debugdata section")]
    Absent,
    /// Not valid xz, or larger than the bound.
    #[error("cannot decompress .gnu_debugdata: {0}")]
    Decompress(String),
    /// The decompressed data is not an ELF with symbols, or is another build's.
    #[error(".gnu_debugdata holds no usable symbol table")]
    Unusable,
    /// The memfd could not be made.
    #[error("cannot hold the decompressed symbols: {0}")]
    Memfd(#[from] std::io::Error),
}

/// Decompresses `binary`'s MiniDebugInfo into an in-memory file.
pub(crate) fn extract(binary: &Binary) -> Result<std::fs::File, MiniDebugError> {
    // SAFETY: a read-only mapping of a mapped executable, only read.
    let map = unsafe { memmap2::Mmap::map(&binary.file) }
        .map_err(|e| MiniDebugError::Read(e.to_string()))?;
    let elf = object::File::parse(&*map).map_err(|e| MiniDebugError::Read(e.to_string()))?;
    let section = elf
        .section_by_name(".gnu_debugdata")
        .ok_or(MiniDebugError::Absent)?;
    let compressed = section
        .data()
        .map_err(|e| MiniDebugError::Read(e.to_string()))?;
    let bytes = decompress(compressed)?;
    let info = ElfInfo::parse(&bytes);
    let other_build = matches!(
        (info.build_id.as_deref(), binary.build_id()),
        (Some(a), Some(b)) if a != b
    );
    if !info.has_symtab || other_build {
        return Err(MiniDebugError::Unusable);
    }
    Ok(memfd::with_bytes(c"sonde-minidebuginfo", &bytes)?)
}

/// xz -> bytes, at most [`MAX_DECOMPRESSED`].
pub(crate) fn decompress(compressed: &[u8]) -> Result<Vec<u8>, MiniDebugError> {
    let mut out = Bounded(Vec::new());
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(compressed), &mut out)
        .map_err(|e| MiniDebugError::Decompress(e.to_string()))?;
    Ok(out.0)
}

/// A Vec that refuses to grow past [`MAX_DECOMPRESSED`].
struct Bounded(Vec<u8>);

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_DECOMPRESSED {
            return Err(std::io::Error::other(format!(
                "larger than {} MiB",
                MAX_DECOMPRESSED >> 20
            )));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(
            decompress(b"\xfd7zXZ\0garbage"),
            Err(MiniDebugError::Decompress(_))
        ));
    }

    #[test]
    fn a_bomb_is_refused_at_the_bound() {
        // 64 MiB + 1 of zeros is about 10 KiB of xz (xz-utils: `cargo xtask setup`).
        let mut xz = std::process::Command::new("xz")
            .args(["-c", "-0"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("xz must be installed (cargo xtask setup)");
        let mut stdin = xz.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            stdin.write_all(&vec![0u8; MAX_DECOMPRESSED + 1]).unwrap();
        });
        let big = xz.wait_with_output().unwrap().stdout;
        feeder.join().unwrap();
        assert!(big.len() < 1 << 20, "{} bytes of xz", big.len());
        let err = decompress(&big).unwrap_err();
        assert!(err.to_string().contains("MiB"), "{err}");
    }
}
