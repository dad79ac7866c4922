//! Reads `str` and `bytes` objects out of a CPython process, bounded: the length is checked before any
//! character is read, so a bad pointer costs one small read and an error, never a huge allocation.
//!
//! `str` (PEP 393): only compact strings are read, the form every code object's names have. The `state`
//! bit field of `PyASCIIObject` (`Include/cpython/unicodeobject.h`) is, from bit 0: `interned:2`,
//! `kind:3`, `compact:1`, `ascii:1`, then `ready:1` (3.9-3.11) or `statically_allocated:1` (3.12+). Only
//! the meaning of bit 7 changed, which is not read: kind, compact and ascii sit at the same bits in every
//! supported version (free-threaded builds, where `interned` is a whole byte, are not supported).
//! A compact ASCII string's characters follow the `PyASCIIObject`, a compact non-ASCII one's the
//! `PyCompactUnicodeObject`, as 1, 2 or 4 bytes per character (`kind`).

use std::io;

use thiserror::Error;

use super::offsets::Offsets;
use crate::runtimes::memory::{Memory, ProcessMemory};

/// Why an object of the process could not be read.
#[derive(Debug, Error)]
pub(crate) enum ObjectError {
    /// The memory could not be read (a bad pointer, or the process is gone).
    #[error(
        "cannot read the {what} at {addr:#x} in the process (gone, or a bad pointer): {source}"
    )]
    Memory {
        /// What was read.
        what: &'static str,
        /// Where.
        addr: u64,
        /// The read's error.
        #[source]
        source: io::Error,
    },
    /// A length outside what the object can hold.
    #[error("the {what} claims {len} units, more than the {max} sonde reads (a bad pointer?)")]
    Length {
        /// What was read.
        what: &'static str,
        /// The length found.
        len: i64,
        /// The bound.
        max: usize,
    },
    /// A field that cannot hold this value in a real object.
    #[error("the {what} at {addr:#x} is not plausible: {why}")]
    Implausible {
        /// What was read.
        what: &'static str,
        /// Where.
        addr: u64,
        /// What is wrong with it.
        why: String,
    },
}

const KIND_SHIFT: u32 = 2;
const KIND_MASK: u32 = 0b111;
const COMPACT_BIT: u32 = 1 << 5;
const ASCII_BIT: u32 = 1 << 6;

fn memory(what: &'static str, addr: u64) -> impl FnOnce(io::Error) -> ObjectError {
    move |source| ObjectError::Memory { what, addr, source }
}

/// Bytes at `off` in `buf` as a little-endian integer of `N` bytes, or an error when `buf` is short
/// (offsets larger than the header that was read).
pub(crate) fn field<const N: usize>(
    buf: &[u8],
    off: u64,
    what: &'static str,
    addr: u64,
) -> Result<[u8; N], ObjectError> {
    usize::try_from(off)
        .ok()
        .and_then(|o| buf.get(o..o.checked_add(N)?))
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| ObjectError::Implausible {
            what,
            addr,
            why: format!("field offset {off} is outside the {} bytes read", buf.len()),
        })
}

/// The `str` at `addr`, of at most `max_chars` characters.
pub(crate) fn read_str(
    mem: &impl Memory,
    offsets: &Offsets,
    addr: u64,
    max_chars: usize,
    what: &'static str,
) -> Result<String, ObjectError> {
    let header_len = offsets.unicode_compact_data.max(offsets.unicode_ascii_data) as usize;
    let mut header = vec![0u8; header_len];
    mem.read(addr, &mut header).map_err(memory(what, addr))?;
    let len = i64::from_le_bytes(field(&header, offsets.unicode_length, what, addr)?);
    let state = u32::from_le_bytes(field(&header, offsets.unicode_state, what, addr)?);
    let len = checked_len(len, max_chars, what)?;
    if state & COMPACT_BIT == 0 {
        return Err(ObjectError::Implausible {
            what,
            addr,
            why: format!("not a compact string (state {state:#x})"),
        });
    }
    let kind = (state >> KIND_SHIFT) & KIND_MASK;
    let ascii = state & ASCII_BIT != 0;
    let (data, width) = match (ascii, kind) {
        (true, 1) => (offsets.unicode_ascii_data, 1),
        (false, 1 | 2 | 4) => (offsets.unicode_compact_data, kind as usize),
        _ => {
            return Err(ObjectError::Implausible {
                what,
                addr,
                why: format!("kind {kind} (ascii {ascii}) is not a string kind"),
            });
        }
    };
    let mut raw = vec![0u8; len * width];
    let at = addr + data;
    mem.read(at, &mut raw).map_err(memory(what, at))?;
    Ok(match width {
        1 if ascii => raw.iter().map(|&b| char::from(b & 0x7f)).collect(),
        // Latin-1: each byte is its code point.
        1 => raw.iter().map(|&b| char::from(b)).collect(),
        2 => raw
            .chunks_exact(2)
            .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
            .map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
        _ => raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .map(|c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
    })
}

/// The contents of the `bytes` object at `addr`, at most `max_len` bytes.
pub(crate) fn read_bytes(
    mem: &ProcessMemory,
    offsets: &Offsets,
    addr: u64,
    max_len: usize,
    what: &'static str,
) -> Result<Vec<u8>, ObjectError> {
    let size_at = addr + offsets.bytes_size;
    let len = mem.u64(size_at).map_err(memory(what, size_at))? as i64;
    let len = checked_len(len, max_len, what)?;
    let mut data = vec![0u8; len];
    let at = addr + offsets.bytes_data;
    mem.read(at, &mut data).map_err(memory(what, at))?;
    Ok(data)
}

fn checked_len(len: i64, max: usize, what: &'static str) -> Result<usize, ObjectError> {
    let checked = usize::try_from(len).ok().filter(|&l| l <= max);
    if checked.is_none() {
        crate::process::untrusted::refusals::count(
            crate::process::untrusted::Input::RuntimeCode,
            crate::process::untrusted::Reason::TooLarge,
        );
    }
    checked.ok_or(ObjectError::Length { what, len, max })
}
