//! Names the frames of Go programs from `.gopclntab`, the table Go's runtime itself walks for
//! tracebacks. It survives `-ldflags='-s -w'`, so stripped Go binaries still get function names,
//! files, lines and inlined frames. Layouts follow runtime/symtab.go and
//! cmd/link/internal/ld/pcln.go of Go 1.16 to 1.2x. The file is untrusted (any process can run a
//! crafted binary): every read is bounds-checked and every loop capped, so a malformed table gives
//! an error or `None`, never a panic.

use std::fs::File;

use layout::layout;

use object::read::elf::ElfSection64;
use object::{LittleEndian as LE, ObjectSection};

/// Deeper chains only come from crafted cycles; Go's inliner stops far earlier.
mod layout;

const MAX_INLINE_DEPTH: usize = 32;
const MAX_STRING: usize = 4096;
/// Shared by all table walks of one lookup: bounds the work a crafted table can cause, while the
/// largest real functions need a few tens of thousands of steps.
const STEP_BUDGET: usize = 1 << 20;
/// The runtime views an inline tree as `[1 << 20]inlinedCall`.
const MAX_INLINE_INDEX: i32 = 1 << 20;
const PCDATA_INL_TREE_INDEX: u32 = 2;
const FUNCDATA_INL_TREE: u32 = 3;
/// Moduledata words read: up to gofunc (word 40 in Go 1.20-1.26, 43 from Go 1.27).
const MODULEDATA_WORDS: usize = 44;
const MAX_CANDIDATES: usize = 16;
/// `_func` fields after the entry, as u32 indices.
const NAME_OFF: usize = 0;
const PCSP: usize = 3;
const PCFILE: usize = 4;
const PCLN: usize = 5;
const NPCDATA: usize = 6;
const CU_OFFSET: usize = 7;

/// One frame of an inline chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GoFrame {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum GoError {
    #[error("cannot map the binary: {0}")]
    Map(#[source] std::io::Error),
    #[error("not an ELF file")]
    NotElf,
    #[error("sonde reads Go symbols only from 64-bit little-endian ELF (x86_64, aarch64), not {0}")]
    UnsupportedElf(&'static str),
    #[error("malformed ELF file: {0}")]
    Elf(#[source] object::Error),
    #[error(
        "this binary was built by Go 1.2-1.15 (.gopclntab magic 0xfffffffb), which sonde does not \
         read (Go 1.16 and later are supported)"
    )]
    TooOld,
    #[error(
        "the .gopclntab of this binary has magic {0:#010x} that sonde does not know (Go 1.16 and \
         later are supported)"
    )]
    UnknownMagic(u32),
    #[error("the .gopclntab of this binary is malformed: {0}")]
    Malformed(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    /// Magic 0xfffffffa: absolute entry addresses, funcdata as absolute pointers.
    V116,
    /// Magic 0xfffffff0: 32-bit entry offsets from textStart, funcdata relative to go:func.*.
    V118,
    /// Magic 0xfffffff1: `_func.startLine` added, 16-byte `inlinedCall`.
    V120,
}

/// A loaded section with file contents: how virtual addresses map to file offsets.
#[derive(Clone, Copy, Debug)]
struct Region {
    addr: u64,
    offset: usize,
    size: usize,
}

impl Region {
    fn of(section: &ElfSection64<'_, '_, LE>, file_len: usize) -> Option<Region> {
        let (offset, size) = section.file_range()?;
        let (offset, size) = (usize::try_from(offset).ok()?, usize::try_from(size).ok()?);
        let region = Region {
            addr: section.address(),
            offset,
            size,
        };
        // Addresses within the region cannot overflow either.
        section.address().checked_add(size as u64)?;
        (offset.checked_add(size)? <= file_len).then_some(region)
    }

    fn offset_of(&self, addr: u64, len: usize) -> Option<usize> {
        let rel = usize::try_from(addr.checked_sub(self.addr)?).ok()?;
        (rel.checked_add(len)? <= self.size).then_some(self.offset + rel)
    }

    fn bytes<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        // In bounds: `of` checked the region against the file.
        &data[self.offset..][..self.size]
    }
}

/// What `open` works out, as plain values: the ELF parser's borrow ends before `GoTable` owns the
/// bytes.
struct Layout {
    version: Version,
    quantum: u64,
    nfunc: usize,
    text_start: u64,
    pcln: Region,
    /// Sub-tables, as offsets within `pcln`.
    funcnametab: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    functab: usize,
    /// Base of the funcdata offsets (Go 1.18+); None: no inline expansion.
    gofunc: Option<u64>,
    loaded: Vec<Region>,
}

/// One function's SP deltas ([`GoTable::sp_deltas`]).
pub(crate) struct SpDeltas {
    pub(crate) entry: u64,
    pub(crate) end: u64,
    pub(crate) name: String,
    pub(crate) flag: u8,
    pub(crate) runs: Vec<(u64, i32)>,
}

pub(crate) struct GoTable {
    /// The whole file: a read-only map, or bytes handed over by tests and fuzzers.
    bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    l: Layout,
}

/// Where one `_func` is: its offset in the pclntab, entry pc, and the size of its fixed part.
struct Func {
    off: usize,
    entry: u64,
    fields: usize,
    header: usize,
}

impl GoTable {
    /// Ok(None) when the file is an ELF without `.gopclntab` (not Go). Maps the file read-only.
    pub(crate) fn open(file: &File) -> Result<Option<GoTable>, GoError> {
        // SAFETY: the map is read-only and only read. Another process truncating or rewriting the
        // file meanwhile could change or fault the bytes under us; binaries are replaced by rename
        // and a running executable cannot be opened for writing (ETXTBSY), the trust every
        // profiler places in mapped binaries.
        let map = unsafe { memmap2::Mmap::map(file) }.map_err(GoError::Map)?;
        Self::parse(Box::new(map))
    }

    /// Same from bytes (tests that damage a real table).
    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Result<Option<GoTable>, GoError> {
        Self::parse(Box::new(bytes))
    }

    fn parse(bytes: Box<dyn AsRef<[u8]> + Send + Sync>) -> Result<Option<GoTable>, GoError> {
        Ok(layout((*bytes).as_ref())?.map(|l| GoTable { bytes, l }))
    }

    /// Functions in the table.
    pub(crate) fn functions(&self) -> usize {
        self.l.nfunc
    }

    /// Whether inlined frames can be expanded (the funcdata base `go:func.*` was found); false
    /// means only physical functions are reported.
    pub(crate) fn has_inline_tree(&self) -> bool {
        self.l.version == Version::V116 || self.l.gofunc.is_some()
    }

    /// The inline chain at ELF virtual address `vaddr`: innermost (the inlined callee holding the
    /// pc) first, the physical function last. None when no function covers it.
    pub(crate) fn frames(&self, vaddr: u64) -> Option<Vec<GoFrame>> {
        let f = self.find_func(vaddr)?;
        let physical = self.string(self.l.funcnametab, self.field(&f, NAME_OFF)?)?;
        let (mut out, mut pc, mut budget) = (Vec::new(), vaddr, STEP_BUDGET);
        let budget = &mut budget;
        // As the runtime's inlineUnwinder: each inlined call's parentPc is a pc in its caller.
        if let Some(tree) = self.funcdata(&f, FUNCDATA_INL_TREE) {
            let call = |i: i32| {
                let (name_off, parent_pc) = self.inlined_call(tree, i)?;
                let name = self.string(self.l.funcnametab, name_off)?;
                Some((name, f.entry.checked_add_signed(parent_pc.into())?))
            };
            let mut ix = self.pcdata(&f, PCDATA_INL_TREE_INDEX, pc, budget);
            let index = |i: &i32| (0..MAX_INLINE_INDEX).contains(i);
            while let Some((name, parent)) = ix.filter(index).and_then(call) {
                out.push(self.frame(&f, name, pc, budget));
                pc = parent;
                ix = self.pcdata(&f, PCDATA_INL_TREE_INDEX, pc, budget);
                ix = ix.filter(|_| out.len() < MAX_INLINE_DEPTH);
            }
        }
        out.push(self.frame(&f, physical, pc, budget));
        Some(out)
    }

    /// The link-time range `[entry, next entry)` of each function named in `names`, in that order;
    /// None for a name the table lacks. One pass over every function.
    pub(crate) fn ranges<const N: usize>(&self, names: [&str; N]) -> [Option<(u64, u64)>; N] {
        let mut out = [None; N];
        for i in 0..self.l.nfunc {
            let (Some(entry), Some(end)) = (self.entry(i), self.entry(i + 1)) else {
                break;
            };
            let Some(name) = self
                .find_func(entry)
                .and_then(|f| self.field(&f, NAME_OFF))
                .and_then(|off| self.string(self.l.funcnametab, off))
            else {
                continue;
            };
            if let Some(k) = names.iter().position(|n| *n == name) {
                out[k] = Some((entry, end));
            }
        }
        out
    }

    /// Function `i`'s link-time range, name, `_func.flag` (0 before Go 1.17, which has none) and
    /// SP delta (`pcsp`) as runs `(first pc, bytes below the entry's SP)`, in pc order; None past
    /// the last function or where the table is unreadable. A run of -1 is a pc the table has no
    /// value for.
    pub(crate) fn sp_deltas(&self, i: usize) -> Option<SpDeltas> {
        let (entry, end) = (self.entry(i)?, self.entry(i + 1)?);
        let f = self.find_func(entry)?;
        let name = self.string(self.l.funcnametab, self.field(&f, NAME_OFF)?)?;
        // funcID, flag, a pad byte, nfuncdata: the fixed part's last four bytes.
        let flag = self.pcln()[f.off + f.header - 3];
        let off = self.field(&f, PCSP)?;
        let mut runs = Vec::new();
        if off != 0 {
            let mut p = self.l.pctab.checked_add(off as usize)?;
            let (mut pc, mut val, mut budget) = (entry, -1i32, STEP_BUDGET);
            while pc < end && budget > 0 {
                budget -= 1;
                let Some((value, next, at)) = self.pc_step(p, pc, val, pc == entry)? else {
                    break;
                };
                runs.push((pc, value));
                (val, pc, p) = (value, next, at);
            }
        }
        Some(SpDeltas {
            entry,
            end,
            name,
            flag,
            runs,
        })
    }

    /// The bytes of the code at link-time range `[start, end)`, when the file holds them.
    pub(crate) fn code(&self, start: u64, end: u64) -> Option<&[u8]> {
        let len = usize::try_from(end.checked_sub(start)?).ok()?;
        let off = self.l.loaded.iter().find_map(|r| r.offset_of(start, len))?;
        (*self.bytes).as_ref().get(off..off + len)
    }

    fn pcln(&self) -> &[u8] {
        self.l.pcln.bytes((*self.bytes).as_ref())
    }

    fn entry(&self, i: usize) -> Option<u64> {
        let l = &self.l;
        entry_at(self.pcln(), l.version, l.functab, l.text_start, i)
    }

    /// The function whose range holds `pc`: the last entry at or below it, as the runtime's
    /// findfunc.
    fn find_func(&self, pc: u64) -> Option<Func> {
        let (t, n, functab) = (self.pcln(), self.l.nfunc, self.l.functab);
        if pc < self.entry(0)? || pc >= self.entry(n)? {
            return None;
        }
        let (mut lo, mut hi) = (0, n);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            (lo, hi) = if self.entry(mid)? <= pc {
                (mid, hi)
            } else {
                (lo, mid)
            };
        }
        let funcoff = match self.l.version {
            Version::V116 => usize::try_from(u64_at(t, functab + lo * 16 + 8)?).ok()?,
            _ => u32_at(t, functab + lo * 8 + 4)? as usize,
        };
        let off = functab.checked_add(funcoff)?;
        let (entry, fields, header) = match self.l.version {
            Version::V116 => (u64_at(t, off)?, 8, 44),
            v => {
                let entry = self.l.text_start.checked_add(u32_at(t, off)?.into())?;
                (entry, 4, if v == Version::V120 { 44 } else { 40 })
            }
        };
        // The whole fixed part must be readable for `field` to stay in bounds.
        t.get(off..off.checked_add(header)?)?;
        Some(Func {
            off,
            entry,
            fields,
            header,
        })
    }

    fn field(&self, f: &Func, i: usize) -> Option<u32> {
        u32_at(self.pcln(), f.off + f.fields + 4 * i)
    }

    fn pcdata(&self, f: &Func, table: u32, pc: u64, budget: &mut usize) -> Option<i32> {
        if table >= self.field(f, NPCDATA)? {
            return None;
        }
        let off = u32_at(self.pcln(), f.off + f.header + 4 * table as usize)?;
        self.pcvalue(f, off, pc, budget)
    }

    /// The address of funcdata `i`, as the runtime's `funcdata`.
    fn funcdata(&self, f: &Func, i: u32) -> Option<u64> {
        let t = self.pcln();
        if i >= u32::from(t[f.off + f.header - 1]) {
            return None;
        }
        let npcdata = self.field(f, NPCDATA)? as usize;
        let start = (f.off + f.header).checked_add(npcdata.checked_mul(4)?)?;
        if self.l.version == Version::V116 {
            // Pointer-aligned by address, as the runtime reads it.
            let misaligned = self.l.pcln.addr.wrapping_add(start as u64) & 7 != 0;
            let at = start + 4 * usize::from(misaligned) + 8 * i as usize;
            return u64_at(t, at).filter(|&a| a != 0);
        }
        let off = u32_at(t, start + 4 * i as usize).filter(|&o| o != u32::MAX)?;
        self.l.gofunc?.checked_add(off.into())
    }

    /// (nameOff, parentPc) of inline tree entry `i`.
    fn inlined_call(&self, tree: u64, i: i32) -> Option<(u32, i32)> {
        let v120 = self.l.version == Version::V120;
        let (size, name) = if v120 { (16, 4) } else { (20, 12) };
        let addr = tree.checked_add(i as u64 * size as u64)?;
        let off = self.l.loaded.iter().find_map(|r| r.offset_of(addr, size))?;
        let call = &(*self.bytes).as_ref()[off..off + size];
        Some((u32_at(call, name)?, u32_at(call, name + 4)? as i32))
    }

    /// `function` with the file and line of `pc`.
    fn frame(&self, f: &Func, function: String, pc: u64, budget: &mut usize) -> GoFrame {
        let file = self.value(f, PCFILE, pc, budget).and_then(|n| {
            let cu = self.field(f, CU_OFFSET)?;
            let index = cu.checked_add(u32::try_from(n).ok()?)? as usize;
            let at = self.l.cutab.checked_add(index.checked_mul(4)?)?;
            let off = u32_at(self.pcln(), at).filter(|&o| o != u32::MAX)?;
            self.string(self.l.filetab, off)
        });
        let line = self.value(f, PCLN, pc, budget);
        let line = line.and_then(|l| u32::try_from(l).ok());
        GoFrame {
            function,
            file,
            line,
        }
    }

    /// The value at `pc` of the pc-value table in `_func` field `field`.
    fn value(&self, f: &Func, field: usize, pc: u64, budget: &mut usize) -> Option<i32> {
        self.pcvalue(f, self.field(f, field)?, pc, budget)
    }

    /// The value of pc-value table `off` at `target`, as the runtime's `pcvalue`; None for its -1.
    fn pcvalue(&self, f: &Func, off: u32, target: u64, budget: &mut usize) -> Option<i32> {
        if off == 0 {
            return None;
        }
        let mut p = self.l.pctab.checked_add(off as usize)?;
        let (mut pc, mut val) = (f.entry, -1i32);
        while *budget > 0 {
            *budget -= 1;
            (val, pc, p) = self.pc_step(p, pc, val, pc == f.entry)??;
            if target < pc {
                return (val >= 0).then_some(val);
            }
        }
        None
    }

    /// One entry of a pc-value table, as the runtime's `step`: from the entry at `p` and the
    /// previous value `val`, the value that holds from `pc` on, the pc where it ends and where the
    /// next entry is. Some(None) at the table's end; None where it cannot be read.
    fn pc_step(
        &self,
        p: usize,
        pc: u64,
        val: i32,
        first: bool,
    ) -> Option<Option<(i32, u64, usize)>> {
        let t = self.pcln();
        let (uv, n) = varint(t, p)?;
        if uv == 0 && !first {
            return Some(None);
        }
        // Zig-zag: odd values are negative.
        let val = val.wrapping_add(if uv & 1 != 0 { !(uv >> 1) } else { uv >> 1 } as i32);
        let (pcdelta, m) = varint(t, p + n)?;
        let end = pc.checked_add(u64::from(pcdelta) * self.l.quantum)?;
        Some(Some((val, end, p + n + m)))
    }

    /// The NUL-terminated string at `table + off`, at most `MAX_STRING` bytes.
    fn string(&self, table: usize, off: u32) -> Option<String> {
        let rest = self.pcln().get(table.checked_add(off as usize)?..)?;
        let rest = &rest[..rest.len().min(MAX_STRING + 1)];
        let len = rest.iter().position(|&b| b == 0)?;
        Some(String::from_utf8_lossy(&rest[..len]).into_owned())
    }
}

fn array<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    array(b, off).map(u32::from_le_bytes)
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    array(b, off).map(u64::from_le_bytes)
}

/// An unsigned LEB128 of at most 5 bytes (a uint32, as Go writes them): (value, length).
fn varint(b: &[u8], off: usize) -> Option<(u32, usize)> {
    let mut v = 0u32;
    for i in 0..5 {
        let byte = *b.get(off.checked_add(i)?)?;
        v |= u32::from(byte & 0x7f).checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn entry_at(t: &[u8], version: Version, functab: usize, text: u64, i: usize) -> Option<u64> {
    match version {
        Version::V116 => u64_at(t, functab.checked_add(i.checked_mul(16)?)?),
        _ => text.checked_add(u32_at(t, functab.checked_add(i.checked_mul(8)?)?)?.into()),
    }
}
