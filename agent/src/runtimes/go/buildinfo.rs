//! The Go version and main module a binary was built from, as `go version -m` prints them,
//! read from the `.go.buildinfo` blob the linker writes (debug/buildinfo,
//! cmd/link/internal/ld/data.go). It survives `-ldflags='-s -w'`. The input is untrusted: every
//! read is bounds-checked.

use object::read::elf::{ElfFile64, ProgramHeader};
use object::{LittleEndian as LE, Object, ObjectSection, elf::PF_W, elf::PT_LOAD};

const MAGIC: &[u8] = b"\xff Go buildinf:";
const HEADER: usize = 32;
/// debug/buildinfo reads this much of the data segment when there is no `.go.buildinfo` section.
const SEARCH: usize = 64 * 1024;
const MAX_FIELD: usize = 4096;
/// Brackets of the modinfo string (cmd/go/internal/modload infoStart and infoEnd).
const SENTINEL: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BuildInfo {
    pub go_version: String,
    pub main_path: Option<String>,
    pub main_version: Option<String>,
}

/// The build information of a 64-bit little-endian Go ELF binary; None for other files and for a
/// missing or malformed blob.
pub(crate) fn read(elf_bytes: &[u8]) -> Option<BuildInfo> {
    let elf = ElfFile64::<LE>::parse(elf_bytes).ok()?;
    let blob = match elf.section_by_name(".go.buildinfo") {
        Some(s) => s.data().ok()?,
        None => first_writable_segment(&elf, elf_bytes)?,
    };
    // 16-byte aligned, as the linker places it.
    let mut starts = (0..blob.len()).step_by(16);
    let start = starts.find(|&i| blob[i..].starts_with(MAGIC))?;
    let blob = &blob[start..];
    let header = blob.get(..HEADER)?;
    let (ptr_size, flags) = (header[14], header[15]);
    let (version, modinfo) = if flags & 2 != 0 {
        // Go 1.18+: both strings follow the header, each prefixed by its uvarint length.
        let (version, rest) = inline_string(&blob[HEADER..])?;
        (version, inline_string(rest).map_or(&[][..], |(m, _)| m))
    } else if flags == 0 && ptr_size == 8 {
        // Before 1.18: pointers to the string headers of runtime.buildVersion and runtime.modinfo.
        let ptr = |i: usize| header[16 + 8 * i..][..8].try_into().map(u64::from_le_bytes);
        let version = go_string(&elf, elf_bytes, ptr(0).ok()?)?;
        let modinfo = ptr(1).ok().and_then(|p| go_string(&elf, elf_bytes, p));
        (version, modinfo.unwrap_or_default())
    } else {
        return None;
    };
    if version.is_empty() || version.len() > MAX_FIELD {
        return None;
    }
    let (main_path, main_version) = main_module(modinfo);
    Some(BuildInfo {
        go_version: String::from_utf8_lossy(version).into_owned(),
        main_path,
        main_version,
    })
}

/// (path, version) of the main module: the `mod` line, else the main package's `path` line.
fn main_module(modinfo: &[u8]) -> (Option<String>, Option<String>) {
    // Like debug/buildinfo: without the framing sentinels there is no module information.
    let n = modinfo.len();
    if n < 2 * SENTINEL + 1 || modinfo[n - SENTINEL - 1] != b'\n' {
        return (None, None);
    }
    let text = String::from_utf8_lossy(&modinfo[SENTINEL..n - SENTINEL]);
    let field = |s: &str| (!s.is_empty() && s.len() <= MAX_FIELD).then(|| s.to_owned());
    let mut path = None;
    for line in text.lines() {
        let mut cols = line.split('\t');
        match cols.next() {
            Some("mod") => {
                let mod_path = cols.next().and_then(field);
                return (mod_path.or(path), cols.next().and_then(field));
            }
            Some("path") => path = cols.next().and_then(field),
            _ => {}
        }
    }
    (path, None)
}

fn inline_string(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut len = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        len |= u64::from(byte & 0x7f).checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            let rest = &b[i + 1..];
            let len = usize::try_from(len).ok().filter(|&l| l <= rest.len())?;
            return Some(rest.split_at(len));
        }
    }
    None
}

/// The bytes of the Go string whose (pointer, length) header is at `addr`.
fn go_string<'a>(elf: &ElfFile64<'a, LE>, bytes: &'a [u8], addr: u64) -> Option<&'a [u8]> {
    let header = read_vaddr(elf, bytes, addr, 16)?;
    let ptr = u64::from_le_bytes(header[..8].try_into().ok()?);
    let len = usize::try_from(u64::from_le_bytes(header[8..].try_into().ok()?)).ok()?;
    read_vaddr(elf, bytes, ptr, len)
}

fn read_vaddr<'a>(
    elf: &ElfFile64<'a, LE>,
    bytes: &'a [u8],
    addr: u64,
    len: usize,
) -> Option<&'a [u8]> {
    elf.sections().find_map(|s| {
        // Sections that are not loaded (address 0) hold no program data; NOBITS has no range.
        let (offset, size) = s.file_range().filter(|_| s.address() != 0)?;
        let rel = addr.checked_sub(s.address())?;
        if rel.checked_add(u64::try_from(len).ok()?)? > size {
            return None;
        }
        let start = usize::try_from(offset.checked_add(rel)?).ok()?;
        bytes.get(start..start.checked_add(len)?)
    })
}

/// Where debug/buildinfo looks when sections are stripped: the start of the first writable segment.
fn first_writable_segment<'a>(elf: &ElfFile64<'a, LE>, bytes: &'a [u8]) -> Option<&'a [u8]> {
    let seg = elf
        .elf_program_headers()
        .iter()
        .find(|p| p.p_type(LE) == PT_LOAD && p.p_flags(LE) & PF_W != 0)?;
    let start = usize::try_from(seg.p_offset(LE)).ok()?;
    let len = usize::try_from(seg.p_filesz(LE)).ok()?.min(SEARCH);
    bytes.get(start..start.checked_add(len)?)
}
