//! Reads HotSpot's description of itself (VMStructs) out of a live JVM: the offsets of the fields of
//! its C++ classes (or the addresses of static ones), the sizes of its types, and its integer
//! constants. This is what HotSpot exports for the serviceability agent, so sonde needs no per-version
//! table for the structures it reads.
//!
//! `libjvm.so` exports four pointer variables (`gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants`, `gHotSpotVMLongConstants`), each to an array of entries ended by one whose
//! name is null, and the layout of those entries (`gHotSpotVM*Entry*Offset`, `*ArrayStride`). All of it
//! is read from the process (the layout variables are set by the JVM's static initialisers).
//!
//! The memory is the profiled process's, so nothing in it is trusted: strides and entry offsets are
//! bounded, at most [`MAX_ENTRIES`] entries are read per table, names are at most [`MAX_NAME`] bytes of
//! ASCII, and every failure is an error, never a panic or an unbounded read.

use std::{collections::HashMap, io, sync::Arc};

use crate::runtimes::{hotspot::elf::HotspotSymbols, memory::ProcessMemory};

/// Entries read per table at most (JDK 17 and 21 have about 1,200 fields, 600 types and 600
/// constants).
pub(crate) const MAX_ENTRIES: usize = 1 << 15;
/// Longest entry accepted (real ones are 16 to 48 bytes).
const MAX_STRIDE: u64 = 256;
/// Longest name read, NUL excluded (the longest real ones are under 80).
pub(crate) const MAX_NAME: usize = 256;
/// Entries read per system call while walking a table.
const ENTRIES_PER_READ: usize = 64;

/// Why VMStructs could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VmStructsError {
    /// A layout variable is not exported by this `libjvm.so`.
    #[error(
        "libjvm.so does not export {name}: not a HotSpot VM sonde can read (OpenJDK 11 to 22 export it)"
    )]
    Missing {
        /// The variable.
        name: &'static str,
    },
    /// A table is not set up yet (the library's static initialisers have not run).
    #[error("the JVM's VMStructs tables are not set up yet (the JVM is still loading)")]
    NotReady,
    /// The process's memory could not be read.
    #[error(
        "cannot read the {what} at {addr:#x} in the JVM process (it exited, or sonde lacks CAP_SYS_PTRACE): {source}"
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
    /// Something no real HotSpot writes: a stride or offset out of bounds, a table without an end,
    /// a name that is too long or not ASCII.
    #[error("the JVM's VMStructs are implausible ({why}): its Java frames are not named")]
    Implausible {
        /// What is wrong.
        why: String,
    },
}

/// Where a field is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// A member, this many bytes into its object.
    Offset(u64),
    /// A static member, at this address in the process.
    Static(u64),
}

/// The four tables of one JVM, by name.
#[derive(Debug, Default)]
pub(crate) struct VmStructs {
    /// (type, field) -> where.
    fields: HashMap<(Arc<str>, Arc<str>), Field>,
    /// Type -> size in bytes.
    types: HashMap<Arc<str>, u64>,
    /// Integer constants (`int` in HotSpot).
    ints: HashMap<Arc<str>, i32>,
    /// Long constants (`uint64_t` in HotSpot).
    longs: HashMap<Arc<str>, u64>,
}

impl VmStructs {
    /// Reads the tables of the JVM in process `pid`, whose `libjvm.so` (described by `symbols`) is
    /// loaded with bias `bias`.
    pub(crate) fn read(
        mem: &ProcessMemory,
        symbols: &HotspotSymbols,
        bias: u64,
    ) -> Result<Self, VmStructsError> {
        let mut reader = Reader {
            mem,
            symbols,
            bias,
            names: HashMap::new(),
            pages: HashMap::new(),
            vars: HashMap::new(),
        };
        let mut out = Self::default();
        reader.walk(
            "gHotSpotVMStructs",
            "gHotSpotVMStructEntryArrayStride",
            "gHotSpotVMStructEntryTypeNameOffset",
            |r, entry, ty| {
                let field = r.name_at(entry, "gHotSpotVMStructEntryFieldNameOffset")?;
                let is_static = r.u32_at(entry, "gHotSpotVMStructEntryIsStaticOffset")? != 0;
                let place = match is_static {
                    true => Field::Static(r.u64_at(entry, "gHotSpotVMStructEntryAddressOffset")?),
                    false => Field::Offset(r.u64_at(entry, "gHotSpotVMStructEntryOffsetOffset")?),
                };
                out.fields.entry((ty, field)).or_insert(place);
                Ok(())
            },
        )?;
        reader.walk(
            "gHotSpotVMTypes",
            "gHotSpotVMTypeEntryArrayStride",
            "gHotSpotVMTypeEntryTypeNameOffset",
            |r, entry, ty| {
                let size = r.u64_at(entry, "gHotSpotVMTypeEntrySizeOffset")?;
                out.types.entry(ty).or_insert(size);
                Ok(())
            },
        )?;
        reader.walk(
            "gHotSpotVMIntConstants",
            "gHotSpotVMIntConstantEntryArrayStride",
            "gHotSpotVMIntConstantEntryNameOffset",
            |r, entry, name| {
                let value = r.u32_at(entry, "gHotSpotVMIntConstantEntryValueOffset")? as i32;
                out.ints.entry(name).or_insert(value);
                Ok(())
            },
        )?;
        reader.walk(
            "gHotSpotVMLongConstants",
            "gHotSpotVMLongConstantEntryArrayStride",
            "gHotSpotVMLongConstantEntryNameOffset",
            |r, entry, name| {
                let value = r.u64_at(entry, "gHotSpotVMLongConstantEntryValueOffset")?;
                out.longs.entry(name).or_insert(value);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// Where `ty::field` is.
    pub(crate) fn field(&self, ty: &str, field: &str) -> Option<Field> {
        // Keys are shared strings; a look-up by &str needs owned ones (a few hundred look-ups per
        // detection).
        self.fields.get(&(Arc::from(ty), Arc::from(field))).copied()
    }

    /// The offset of the member `ty::field` (None also when it is static).
    pub(crate) fn offset(&self, ty: &str, field: &str) -> Option<u64> {
        match self.field(ty, field)? {
            Field::Offset(off) => Some(off),
            Field::Static(_) => None,
        }
    }

    /// The address of the static `ty::field` (None also when it is a member).
    pub(crate) fn address(&self, ty: &str, field: &str) -> Option<u64> {
        match self.field(ty, field)? {
            Field::Static(addr) => Some(addr),
            Field::Offset(_) => None,
        }
    }

    /// `sizeof(ty)`.
    pub(crate) fn size(&self, ty: &str) -> Option<u64> {
        self.types.get(ty).copied()
    }

    /// The integer constant `name`.
    pub(crate) fn int(&self, name: &str) -> Option<i32> {
        self.ints.get(name).copied()
    }

    /// The long constant `name` (none is needed to walk or name frames yet; read for completeness
    /// and checked by the tests).
    #[cfg(test)]
    pub(crate) fn long(&self, name: &str) -> Option<u64> {
        self.longs.get(name).copied()
    }

    /// (fields, types, int constants, long constants) read.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.fields.len(),
            self.types.len(),
            self.ints.len(),
            self.longs.len(),
        )
    }
}

/// Reads tables and their names, with the names already read by address (every field of a type
/// shares its type's name string).
struct Reader<'a> {
    mem: &'a ProcessMemory,
    symbols: &'a HotspotSymbols,
    bias: u64,
    names: HashMap<u64, Arc<str>>,
    /// Pages of the process holding names, read once each: the names lie packed in libjvm's
    /// read-only data, so a few dozen reads stand for a few thousand.
    pages: HashMap<u64, Box<[u8]>>,
    /// The exported variables read so far: each once, not once per entry.
    vars: HashMap<&'static str, u64>,
}

/// One table entry's bytes and where it was.
struct Entry<'e> {
    bytes: &'e [u8],
    addr: u64,
}

impl Reader<'_> {
    /// The value of the exported u64 variable `name`.
    fn variable(&mut self, name: &'static str) -> Result<u64, VmStructsError> {
        if let Some(&value) = self.vars.get(name) {
            return Ok(value);
        }
        let addr = self
            .symbols
            .get(name)
            .ok_or(VmStructsError::Missing { name })?
            .wrapping_add(self.bias);
        let value = self
            .mem
            .u64(addr)
            .map_err(|source| VmStructsError::Memory {
                what: name,
                addr,
                source,
            })?;
        self.vars.insert(name, value);
        Ok(value)
    }

    /// An entry offset variable, checked to leave room for `width` bytes in an entry of `stride`.
    fn entry_offset(&mut self, name: &'static str, width: u64) -> Result<usize, VmStructsError> {
        let off = self.variable(name)?;
        match off.checked_add(width) {
            Some(end) if end <= MAX_STRIDE => Ok(off as usize),
            _ => Err(VmStructsError::Implausible {
                why: format!("{name} is {off}"),
            }),
        }
    }

    /// Calls `each` with every entry of the table `table` (whose entries are `stride_var` bytes
    /// apart) and its name (the string at `name_var` in the entry), up to the entry whose name is
    /// null.
    fn walk(
        &mut self,
        table: &'static str,
        stride_var: &'static str,
        name_var: &'static str,
        mut each: impl FnMut(&mut Self, &Entry<'_>, Arc<str>) -> Result<(), VmStructsError>,
    ) -> Result<(), VmStructsError> {
        let base = self.variable(table)?;
        let stride = self.variable(stride_var)?;
        let name_off = self.entry_offset(name_var, 8)?;
        if base == 0 || stride == 0 {
            return Err(VmStructsError::NotReady);
        }
        if stride > MAX_STRIDE || (name_off as u64) + 8 > stride {
            return Err(VmStructsError::Implausible {
                why: format!("{table} entries of {stride} bytes, names at {name_off}"),
            });
        }
        let stride = stride as usize;
        let mut chunk = Vec::new();
        let mut index = 0;
        while index < MAX_ENTRIES {
            let addr = base + (index * stride) as u64;
            let n = ENTRIES_PER_READ.min(MAX_ENTRIES - index);
            chunk.resize(n * stride, 0);
            // The table may end close to the end of its mapping: on a failed read of a whole
            // chunk, read just the next entry.
            let n = match self.mem.read(addr, &mut chunk) {
                Ok(()) => n,
                Err(_) => {
                    chunk.truncate(stride);
                    self.mem
                        .read(addr, &mut chunk)
                        .map_err(|source| VmStructsError::Memory {
                            what: table,
                            addr,
                            source,
                        })?;
                    1
                }
            };
            for i in 0..n {
                let entry = Entry {
                    bytes: &chunk[i * stride..(i + 1) * stride],
                    addr: addr + (i * stride) as u64,
                };
                let name_ptr = le_u64(entry.bytes, name_off);
                if name_ptr == 0 {
                    return Ok(());
                }
                let name = self.name(name_ptr)?;
                each(self, &entry, name)?;
            }
            index += n;
        }
        Err(VmStructsError::Implausible {
            why: format!("{table} has no end within {MAX_ENTRIES} entries"),
        })
    }

    /// The string the pointer at entry offset variable `var` in `entry` points to.
    fn name_at(
        &mut self,
        entry: &Entry<'_>,
        var: &'static str,
    ) -> Result<Arc<str>, VmStructsError> {
        let off = self.entry_offset(var, 8)?;
        let ptr = field(entry, off, 8, var).map(|b| le_u64(b, 0))?;
        if ptr == 0 {
            return Err(VmStructsError::Implausible {
                why: format!("a null {var} in the entry at {:#x}", entry.addr),
            });
        }
        self.name(ptr)
    }

    /// The u32 at entry offset variable `var` in `entry`.
    fn u32_at(&mut self, entry: &Entry<'_>, var: &'static str) -> Result<u32, VmStructsError> {
        let off = self.entry_offset(var, 4)?;
        field(entry, off, 4, var).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    /// The u64 at entry offset variable `var` in `entry`.
    fn u64_at(&mut self, entry: &Entry<'_>, var: &'static str) -> Result<u64, VmStructsError> {
        let off = self.entry_offset(var, 8)?;
        field(entry, off, 8, var).map(|b| le_u64(b, 0))
    }

    /// The NUL-terminated ASCII string at `addr`, read once per address, from whole pages read
    /// once each.
    fn name(&mut self, addr: u64) -> Result<Arc<str>, VmStructsError> {
        if let Some(name) = self.names.get(&addr) {
            return Ok(name.clone());
        }
        let mut bytes = Vec::new();
        let mut at = addr;
        loop {
            let page = at & !(PAGE - 1);
            let rest = &self.page(page)?[(at - page) as usize..];
            if let Some(n) = rest.iter().position(|&b| b == 0) {
                bytes.extend_from_slice(&rest[..n]);
                break;
            }
            bytes.extend_from_slice(rest);
            if bytes.len() > MAX_NAME {
                break;
            }
            at = page + PAGE;
        }
        let name: Arc<str> = Arc::from(checked_name(bytes, addr, MAX_NAME)?);
        self.names.insert(addr, name.clone());
        Ok(name)
    }

    /// The page at `page`, read unless it was.
    fn page(&mut self, page: u64) -> Result<&[u8], VmStructsError> {
        if !self.pages.contains_key(&page) {
            if self.pages.len() >= MAX_PAGES {
                self.pages.clear();
            }
            let mut buf = vec![0; PAGE as usize].into_boxed_slice();
            self.mem
                .read(page, &mut buf)
                .map_err(|source| VmStructsError::Memory {
                    what: "name",
                    addr: page,
                    source,
                })?;
            self.pages.insert(page, buf);
        }
        Ok(&self.pages[&page])
    }
}

/// The `width` bytes at `off` in `entry` (the offset variables were checked against the largest
/// stride, not this table's).
fn field<'e>(
    entry: &Entry<'e>,
    off: usize,
    width: usize,
    var: &'static str,
) -> Result<&'e [u8], VmStructsError> {
    entry
        .bytes
        .get(off..off + width)
        .ok_or_else(|| VmStructsError::Implausible {
            why: format!(
                "{var} ({off}) lies outside entries of {} bytes",
                entry.bytes.len()
            ),
        })
}

/// The little-endian u64 at `off` in `bytes` (checked by the caller).
fn le_u64(bytes: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(bytes[off..off + 8].try_into().expect("8 bytes"))
}

/// Page size of the reads of names.
const PAGE: u64 = 4096;
/// Pages of names kept while the tables are read (the names of JDK 17 and 21 span a few dozen).
const MAX_PAGES: usize = 256;

/// `bytes` (a string's, NUL excluded) as a name: at most `max` bytes of ASCII.
fn checked_name(bytes: Vec<u8>, addr: u64, max: usize) -> Result<String, VmStructsError> {
    if bytes.len() > max {
        return Err(VmStructsError::Implausible {
            why: format!("the name at {addr:#x} is longer than {max} bytes"),
        });
    }
    match bytes.is_ascii() {
        true => Ok(String::from_utf8(bytes).expect("ASCII")),
        false => Err(VmStructsError::Implausible {
            why: format!("the name at {addr:#x} is not ASCII"),
        }),
    }
}

/// The NUL-terminated ASCII string at `addr` in the process, at most `max` bytes before the NUL.
/// Read a page at a time, so a string ending just before unmapped memory is still read.
pub(crate) fn c_string(
    mem: &ProcessMemory,
    addr: u64,
    max: usize,
) -> Result<String, VmStructsError> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() <= max {
        let page_left = PAGE - at % PAGE;
        let want = page_left.min((max + 1 - out.len()) as u64) as usize;
        let mut buf = vec![0; want];
        mem.read(at, &mut buf)
            .map_err(|source| VmStructsError::Memory {
                what: "name",
                addr: at,
                source,
            })?;
        if let Some(end) = buf.iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return checked_name(out, addr, max);
        }
        out.extend_from_slice(&buf);
        at += want as u64;
    }
    Err(VmStructsError::Implausible {
        why: format!("the name at {addr:#x} is longer than {max} bytes"),
    })
}

#[cfg(test)]
mod tests;
