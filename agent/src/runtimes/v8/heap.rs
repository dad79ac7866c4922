//! Reading V8 heap objects out of a Node.js process (`process_vm_readv`): tagged pointers, instance
//! types, strings of every representation, and the fixed and byte arrays V8 keeps its tables in. Every
//! read is bounded; every object is checked by type before it is trusted.

use std::fmt;

use super::layout::Layout;
use crate::runtimes::memory::ProcessMemory;

/// Longest string read (a function or script name); longer ones are cut.
const MAX_NAME: u64 = 1024;
/// Longest script source read to find its line ends (TypeScript's compiler is 9 MB).
pub(crate) const MAX_SOURCE: u64 = 32 << 20;
/// Largest array read (position tables, line ends, deoptimization data).
const MAX_ARRAY_BYTES: u64 = 8 << 20;
/// Nesting of cons, thin and sliced strings followed.
const MAX_STRING_DEPTH: u32 = 24;

/// Why an object could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The memory was unreadable (the process exited, or the object is gone).
    Memory(u64),
    /// The word at hand is not what it should be (a Smi where a pointer is due, another type).
    Unexpected(&'static str, u64),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Memory(addr) => write!(f, "memory at {addr:#x} is unreadable"),
            ReadError::Unexpected(what, word) => write!(f, "{word:#x} is not {what}"),
        }
    }
}

/// The heap of one Node.js process.
pub(crate) struct Heap<'a> {
    mem: ProcessMemory,
    pub(crate) layout: &'a Layout,
}

/// Whether `word` is a tagged heap object pointer.
pub(crate) fn is_object(word: u64) -> bool {
    word & 3 == 1
}

/// The value of the Smi `word` (64-bit Smis: the upper half), if it is one.
pub(crate) fn smi(word: u64) -> Option<i64> {
    (word & 1 == 0).then_some((word as i64) >> 32)
}

impl<'a> Heap<'a> {
    pub(crate) fn new(pid: u32, layout: &'a Layout) -> Self {
        Self {
            mem: ProcessMemory::new(pid),
            layout,
        }
    }

    /// `len` bytes at `addr`.
    pub(crate) fn bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>, ReadError> {
        let mut buf = vec![0; len];
        self.mem
            .read(addr, &mut buf)
            .map_err(|_| ReadError::Memory(addr))?;
        Ok(buf)
    }

    pub(crate) fn word(&self, addr: u64) -> Result<u64, ReadError> {
        self.mem.u64(addr).map_err(|_| ReadError::Memory(addr))
    }

    fn u32(&self, addr: u64) -> Result<u32, ReadError> {
        let mut b = [0; 4];
        self.mem
            .read(addr, &mut b)
            .map_err(|_| ReadError::Memory(addr))?;
        Ok(u32::from_le_bytes(b))
    }

    /// The field at `offset` of the object at tagged `object`.
    pub(crate) fn field(&self, object: u64, offset: u64) -> Result<u64, ReadError> {
        self.word(untag(object)? + offset)
    }

    /// The instance type of the object at tagged `object`.
    pub(crate) fn instance_type(&self, object: u64) -> Result<u16, ReadError> {
        let map = self.field(object, 0)?;
        let mut b = [0; 2];
        self.mem
            .read(untag(map)? + self.layout.map_instance_type, &mut b)
            .map_err(|_| ReadError::Memory(map))?;
        Ok(u16::from_le_bytes(b))
    }

    /// `object` if it is of one of `types`.
    pub(crate) fn typed(
        &self,
        object: u64,
        types: &[u16],
        what: &'static str,
    ) -> Result<u64, ReadError> {
        match self.instance_type(object)? {
            t if types.contains(&t) => Ok(object),
            _ => Err(ReadError::Unexpected(what, object)),
        }
    }

    /// The string at tagged `object`, cut at `limit` bytes; None when it is not a string.
    pub(crate) fn string(&self, object: u64, limit: u64) -> Result<Option<String>, ReadError> {
        let mut out = Vec::new();
        if !self.append_string(object, 0, u64::MAX, limit, &mut out, MAX_STRING_DEPTH)? {
            return Ok(None);
        }
        Ok(Some(String::from_utf8_lossy(&out).into_owned()))
    }

    /// A short string (a name).
    pub(crate) fn name(&self, object: u64) -> Result<Option<String>, ReadError> {
        self.string(object, MAX_NAME)
    }

    /// Appends characters `from..to` of the string at `object` to `out` (one-byte strings as they
    /// are, two-byte strings' code units below 256, others as `?`); false if it is not a string.
    fn append_string(
        &self,
        object: u64,
        from: u64,
        to: u64,
        limit: u64,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<bool, ReadError> {
        let ty = self.instance_type(object)?;
        let s = &self.layout.strings;
        if ty >= self.layout.types.first_nonstring || depth == 0 {
            return Ok(false);
        }
        let length = u64::from(self.u32(untag(object)? + s.length)?);
        let to = to.min(length);
        if from >= to || out.len() as u64 >= limit {
            return Ok(true);
        }
        let repr = ty & s.repr_mask;
        if repr == s.seq {
            let one_byte = ty & s.encoding_mask == s.one_byte;
            let n = (to - from).min(limit - out.len() as u64);
            let width = if one_byte { 1 } else { 2 };
            let raw = self.bytes(
                untag(object)? + s.chars + from * width,
                (n * width) as usize,
            )?;
            if one_byte {
                out.extend_from_slice(&raw);
            } else {
                out.extend(
                    raw.chunks_exact(2)
                        .map(|c| match u16::from_le_bytes([c[0], c[1]]) {
                            u @ 0..=0x7f => u as u8,
                            _ => b'?',
                        }),
                );
            }
            return Ok(true);
        }
        if repr == s.cons {
            let first = self.field(object, s.cons_first)?;
            let first_len = u64::from(self.u32(untag(first)? + s.length)?);
            if from < first_len {
                self.append_string(first, from, to.min(first_len), limit, out, depth - 1)?;
            }
            if to > first_len {
                let second = self.field(object, s.cons_second)?;
                let from = from.saturating_sub(first_len);
                self.append_string(second, from, to - first_len, limit, out, depth - 1)?;
            }
            return Ok(true);
        }
        if repr == s.thin {
            let actual = self.field(object, s.thin_actual)?;
            return self.append_string(actual, from, to, limit, out, depth - 1);
        }
        if repr == s.sliced {
            let parent = self.field(object, s.sliced_parent)?;
            let offset = smi(self.field(object, s.sliced_offset)?)
                .unwrap_or(0)
                .max(0) as u64;
            return self.append_string(parent, from + offset, to + offset, limit, out, depth - 1);
        }
        // External strings (Node's own modules): their characters live outside the heap, behind
        // a C++ resource; their names stay unread.
        Ok(false)
    }

    /// The length (in elements) of the fixed or byte array at `object`.
    pub(crate) fn array_length(&self, object: u64) -> Result<u64, ReadError> {
        let length = self.field(object, self.layout.array_length)?;
        match smi(length) {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => Err(ReadError::Unexpected("an array length", length)),
        }
    }

    /// The bytes of the byte array at `object`.
    pub(crate) fn byte_array(&self, object: u64) -> Result<Vec<u8>, ReadError> {
        let object = self.typed(object, &self.layout.types.byte_arrays, "a byte array")?;
        let n = self.array_length(object)?;
        if n > MAX_ARRAY_BYTES {
            return Err(ReadError::Unexpected("a byte array of a sane size", n));
        }
        self.bytes(untag(object)? + self.layout.array_data, n as usize)
    }

    /// The first `max` words of the fixed array at `object` (of one of `types`).
    pub(crate) fn fixed_array(
        &self,
        object: u64,
        types: &[u16],
        max: u64,
    ) -> Result<Vec<u64>, ReadError> {
        let object = self.typed(object, types, "a fixed array")?;
        let n = self.array_length(object)?.min(max);
        if n * 8 > MAX_ARRAY_BYTES {
            return Err(ReadError::Unexpected("a fixed array of a sane size", n));
        }
        let raw = self.bytes(untag(object)? + self.layout.array_data, (n * 8) as usize)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }
}

/// The address of the object at tagged `object`.
pub(crate) fn untag(object: u64) -> Result<u64, ReadError> {
    match is_object(object) {
        true => Ok(object - 1),
        false => Err(ReadError::Unexpected("a heap object", object)),
    }
}
