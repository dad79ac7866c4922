//! Ruby strings and path objects in a process's memory (`RString`, and the `[path, realpath]`
//! `RArray` an instruction sequence's `pathobj` may be), read as the version lays them out.

use super::offsets::Layout;
use crate::runtimes::memory::ProcessMemory;

/// `RBasic.flags & T_MASK`: the object's type.
const T_MASK: u64 = 0x1f;
const T_STRING: u64 = 0x05;
const T_ARRAY: u64 = 0x07;
/// `RSTRING_NOEMBED` and `RARRAY_EMBED_FLAG` (`FL_USER1`).
const FL_USER1: u64 = 1 << 13;
/// Up to 3.1: an embedded string's length, in the flags (`RSTRING_EMBED_LEN_SHIFT`, 5 bits).
const EMBED_LEN_SHIFT: u32 = 14;
/// Longest string read: names and paths.
const MAX_LEN: u64 = 1024;

/// The string object at `addr`; None when it is not a readable string.
pub(crate) fn string(memory: &ProcessMemory, layout: &Layout, addr: u64) -> Option<String> {
    let flags = memory.u64(addr).ok()?;
    if flags & T_MASK != T_STRING {
        return None;
    }
    let (len, bytes_at) = match (flags & FL_USER1 != 0, layout.string_len_field) {
        // On the heap: `as.heap.len` (or the shared `len`) at 16, `as.heap.ptr` at 24.
        (true, _) => (memory.u64(addr + 16).ok()?, memory.u64(addr + 24).ok()?),
        (false, true) => (memory.u64(addr + 16).ok()?, addr + 24),
        (false, false) => ((flags >> EMBED_LEN_SHIFT) & 0x1f, addr + 16),
    };
    if len > MAX_LEN {
        return None;
    }
    let mut buf = vec![0; len as usize];
    memory.read(bytes_at, &mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// The file of a `pathobj`: a string, or `[path, realpath]` (the real path when it is a string).
pub(crate) fn path(memory: &ProcessMemory, layout: &Layout, addr: u64) -> Option<String> {
    let flags = memory.u64(addr).ok()?;
    match flags & T_MASK {
        T_STRING => string(memory, layout, addr),
        T_ARRAY => {
            // Embedded elements start at 16; a heap array's pointer is `as.heap.ptr` at 32.
            let items = match flags & FL_USER1 != 0 {
                true => addr + 16,
                false => memory.u64(addr + 32).ok()?,
            };
            let (relative, real) = (memory.u64(items).ok()?, memory.u64(items + 8).ok()?);
            [real, relative]
                .into_iter()
                .filter(|&a| a != 0)
                .find_map(|a| string(memory, layout, a))
        }
        _ => None,
    }
}
