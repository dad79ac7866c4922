//! Reads a code blob at a `CodeBlob*` the kernel stored, and for compiled Java code (an nmethod) the
//! debug information that says which methods a pc is in, inlined calls included.
//!
//! An nmethod (JDK 11 to 22) holds, after its code, the `Method*`s its debug information refers to
//! (metadata, from `_metadata_offset`), the scopes (`_scopes_data_begin`) and the PcDescs
//! (`_scopes_pcs_offset` to `_dependencies_offset`), all relative to the blob. A PcDesc maps a pc
//! offset (from the code's start) to the scope decoded at its `scope_decode_offset`; a scope is
//! three compressed numbers (`DebugInfoReadStream`): the offset of its caller's scope (0: none), its
//! method as an index into the metadata (1-based), and its bci + 1. The first scope is the innermost
//! (the inlined callee at the pc), its callers follow out to the nmethod's own method.
//!
//! Which PcDesc describes a pc: HotSpot records a call site at its return address, so a return
//! address has a PcDesc of its own, found by equality. An exact pc (the leaf, or an interrupted
//! instruction) usually has none: it takes the nearest PcDesc at or after it, as HotSpot's
//! `pc_desc_near` does (the next safepoint or call of the same code). A return address without a
//! PcDesc of its own (not expected) falls back the same way.

use std::collections::HashSet;

use super::{
    layout::Layout,
    method::{ReadError, le_u64},
    unsigned5::Stream,
    vmstructs,
};
use crate::runtimes::memory::ProcessMemory;

/// Bytes of metadata, scopes and PcDescs read for one nmethod at most (C2's largest methods have a
/// few hundred KiB).
const MAX_DEBUG_BYTES: u64 = 4 << 20;
/// Inlined scopes followed for one pc at most (HotSpot inlines 15 levels deep by default).
pub(crate) const MAX_SCOPES: usize = 64;
/// Longest blob name read (`StubRoutines (1)`, `I2C/C2I adapters`, ...).
const MAX_BLOB_NAME: usize = 128;

/// What a code blob is, as far as naming goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Blob {
    /// Compiled Java code.
    Nmethod(Nmethod),
    /// The wrapper of a native (JNI) method, compiled as a "native nmethod".
    NativeWrapper {
        /// `nmethod::_compile_id`.
        compile_id: u32,
        /// Its `Method*`.
        method: u64,
    },
    /// Any other blob: a stub, an adapter, the interpreter.
    Other {
        /// `CodeBlob::_name`.
        name: String,
    },
}

impl Blob {
    /// Bytes held, for the cache's budget.
    pub(crate) fn size(&self) -> usize {
        match self {
            Blob::Nmethod(n) => n.scopes.len() + 8 * (n.pcs.len() + n.metadata.len()),
            Blob::NativeWrapper { .. } => 16,
            Blob::Other { name } => name.len(),
        }
    }
}

/// A compiled method's debug information.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nmethod {
    /// `nmethod::_compile_id`: the kernel's validation value.
    pub(crate) compile_id: u32,
    /// The compiled method's `Method*`.
    pub(crate) method: u64,
    /// (pc offset, scope decode offset) of every PcDesc, in the nmethod's (ascending pc) order.
    pcs: Vec<(i32, i32)>,
    /// The scopes' bytes.
    scopes: Vec<u8>,
    /// The metadata the scopes index.
    metadata: Vec<u64>,
    /// The compressed stream's excluded bytes (`layout`).
    excluded: u8,
}

/// One level of an inline chain: a method and where in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Scope {
    /// Its `Method*`.
    pub(crate) method: u64,
    /// Its bytecode index (-1: the method's entry).
    pub(crate) bci: i32,
}

impl Nmethod {
    /// Every method its code runs, its own and those inlined into it: what names any of its frames.
    pub(crate) fn methods(&self) -> HashSet<u64> {
        let mut all = HashSet::from([self.method]);
        for &(pc, _) in &self.pcs {
            let Ok(pc) = u32::try_from(pc) else { continue };
            if let Ok(chain) = self.scopes_at(pc, false) {
                all.extend(chain.iter().map(|s| s.method));
            }
        }
        all
    }

    /// The PcDesc offsets (for tests that look for a pc with inlined calls).
    #[cfg(test)]
    pub(crate) fn pc_offsets(&self) -> impl Iterator<Item = i32> + '_ {
        self.pcs.iter().map(|&(pc, _)| pc)
    }

    /// The methods running at `pc_offset` from the code's start, innermost first, this nmethod's
    /// own method last; `exact` when the pc is the interrupted instruction rather than a return
    /// address.
    pub(crate) fn scopes_at(&self, pc_offset: u32, exact: bool) -> Result<Vec<Scope>, ReadError> {
        let outer = Scope {
            method: self.method,
            bci: -1,
        };
        let Some(mut offset) = self.decode_offset(pc_offset, exact) else {
            // Past the last PcDesc (stubs, the deoptimization handler): the method itself.
            return Ok(vec![outer]);
        };
        let mut chain = Vec::new();
        // Offset 0 is HotSpot's serialized null: no (more) scope.
        while offset != 0 {
            let bad = |why: String| ReadError::Implausible {
                what: "nmethod scope",
                addr: offset as u64,
                why,
            };
            if chain.len() == MAX_SCOPES {
                return Err(bad(format!("more than {MAX_SCOPES} inlined scopes")));
            }
            let mut s = Stream::new(&self.scopes, offset, self.excluded);
            let (Some(sender), Some(index), Some(bci)) = (s.uint(), s.uint(), s.int()) else {
                return Err(bad("it does not decode".into()));
            };
            let method = match index {
                0 => self.method,
                i => *self
                    .metadata
                    .get(i as usize - 1)
                    .ok_or_else(|| bad(format!("method index {i} beyond the metadata")))?,
            };
            // Stored as bci + 1 (`DebugInfoWriteStream::write_bci`: InvocationEntryBci is -1).
            chain.push(Scope {
                method,
                bci: bci.wrapping_sub(1),
            });
            // Senders are written before their callees: offsets only go down, so this ends.
            let sender = sender as usize;
            if sender >= offset {
                return Err(bad(format!("its caller at {sender} is not before it")));
            }
            offset = sender;
        }
        if chain.is_empty() {
            chain.push(outer);
        }
        Ok(chain)
    }

    /// The scope decode offset of the PcDesc describing `pc_offset`.
    fn decode_offset(&self, pc_offset: u32, exact: bool) -> Option<usize> {
        let pc = i32::try_from(pc_offset).ok()?;
        let equal = (!exact)
            .then(|| self.pcs.iter().find(|&&(p, _)| p == pc))
            .flatten();
        let (_, decode) = equal.or_else(|| {
            self.pcs
                .iter()
                .filter(|&&(p, _)| p >= pc)
                .min_by_key(|&&(p, _)| p)
        })?;
        usize::try_from(*decode)
            .ok()
            .filter(|&d| d < self.scopes.len() || d == 0)
    }
}

/// Reads code blobs of one JVM.
pub(crate) struct BlobReader<'a> {
    mem: ProcessMemory,
    layout: &'a Layout,
}

impl<'a> BlobReader<'a> {
    /// Reads blobs of the JVM of `layout` in process `pid`.
    pub(crate) fn new(pid: u32, layout: &'a Layout) -> Self {
        Self {
            mem: ProcessMemory::new(pid),
            layout,
        }
    }

    /// The blob's name (`nmethod`, `StubRoutines (1)`, ...).
    pub(crate) fn name(&self, blob: u64) -> Result<String, ReadError> {
        let ptr = self
            .mem
            .u64(blob.wrapping_add(self.layout.blob.name))
            .map_err(|source| ReadError::Memory {
                what: "code blob",
                addr: blob,
                source,
            })?;
        vmstructs::c_string(&self.mem, ptr, MAX_BLOB_NAME).map_err(|e| ReadError::Implausible {
            what: "code blob name",
            addr: blob,
            why: e.to_string(),
        })
    }

    /// The blob at `blob`, with its debug information when it is compiled Java code.
    pub(crate) fn read(&self, blob: u64) -> Result<Blob, ReadError> {
        let name = self.name(blob)?;
        let native = match name.as_str() {
            "nmethod" => false,
            "native nmethod" => true,
            _ => return Ok(Blob::Other { name }),
        };
        let n = &self.layout.nmethod;
        let mut header = vec![0; n.size as usize];
        self.mem
            .read(blob, &mut header)
            .map_err(|source| ReadError::Memory {
                what: "nmethod",
                addr: blob,
                source,
            })?;
        // Offsets checked by `Layout::check` to lie within the header.
        let int = |off: u64| i32::from_le_bytes(header[off as usize..][..4].try_into().expect("4"));
        let compile_id = int(n.compile_id) as u32;
        let method = le_u64(&header, n.method);
        if native {
            return Ok(Blob::NativeWrapper { compile_id, method });
        }
        let bad = |why: String| ReadError::Implausible {
            what: "nmethod",
            addr: blob,
            why,
        };
        let [metadata, pcs, end] = [
            n.metadata_offset,
            n.scopes_pcs_offset,
            n.dependencies_offset,
        ]
        .map(|off| int(off) as i64);
        let scopes = (le_u64(&header, n.scopes_data) as i64).wrapping_sub(blob as i64);
        if !(n.size as i64 <= metadata && metadata <= scopes && scopes <= pcs && pcs <= end)
            || (end - metadata) as u64 > MAX_DEBUG_BYTES
            || (scopes - metadata) % 8 != 0
        {
            return Err(bad(format!(
                "its debug information is laid out {metadata}, {scopes}, {pcs}, {end}"
            )));
        }
        let mut debug = vec![0; (end - metadata) as usize];
        let at = blob + metadata as u64;
        self.mem
            .read(at, &mut debug)
            .map_err(|source| ReadError::Memory {
                what: "nmethod debug information",
                addr: at,
                source,
            })?;
        let (scopes, pcs) = ((scopes - metadata) as usize, (pcs - metadata) as usize);
        let d = &self.layout.pc_desc;
        let pc_descs = debug[pcs..]
            .chunks_exact(d.size as usize)
            .map(|e| {
                let field =
                    |off: u64| i32::from_le_bytes(e[off as usize..][..4].try_into().expect("4"));
                (field(d.pc_offset), field(d.scope_decode_offset))
            })
            .collect();
        Ok(Blob::Nmethod(Nmethod {
            compile_id,
            method,
            pcs: pc_descs,
            metadata: debug[..scopes]
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8")))
                .collect(),
            scopes: debug[scopes..pcs].to_vec(),
            excluded: self.layout.unsigned5_excluded,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::hotspot::unsigned5::tests::encode;

    /// An nmethod of method 0x1000 whose pc 40 is in `c` (0x3000) inlined into `b` (0x2000), and pc
    /// 80 in its own method only; scopes written as HotSpot writes them (callers first).
    fn nmethod(excluded: u8) -> Nmethod {
        let mut scopes = vec![0xaa]; // offset 0 is never a scope
        let scope = |scopes: &mut Vec<u8>, sender: u32, index: u32, bci: u32| {
            let at = scopes.len() as i32;
            for v in [sender, index, bci + 1] {
                encode(v, excluded, scopes);
            }
            at
        };
        let outer = scope(&mut scopes, 0, 1, 7);
        let middle = scope(&mut scopes, outer as u32, 2, 300);
        let inner = scope(&mut scopes, middle as u32, 3, 4);
        let plain = scope(&mut scopes, 0, 1, 20);
        Nmethod {
            compile_id: 9,
            method: 0x1000,
            pcs: vec![(-1, 0), (40, inner), (80, plain)],
            scopes,
            metadata: vec![0x1000, 0x2000, 0x3000],
            excluded,
        }
    }

    fn chain(n: &Nmethod, pc: u32, exact: bool) -> Vec<(u64, i32)> {
        n.scopes_at(pc, exact)
            .unwrap()
            .into_iter()
            .map(|s| (s.method, s.bci))
            .collect()
    }

    #[test]
    fn inline_chains_innermost_first() {
        for excluded in [0, 1] {
            let n = nmethod(excluded);
            let inlined = vec![(0x3000, 4), (0x2000, 300), (0x1000, 7)];
            // A return address has its own PcDesc.
            assert_eq!(chain(&n, 40, false), inlined);
            // An exact pc takes the next PcDesc at or after it.
            assert_eq!(chain(&n, 33, true), inlined);
            assert_eq!(chain(&n, 40, true), inlined);
            assert_eq!(chain(&n, 41, true), vec![(0x1000, 20)]);
            // A return address without a PcDesc of its own falls back the same way.
            assert_eq!(chain(&n, 60, false), vec![(0x1000, 20)]);
            // Past the last PcDesc: the nmethod's own method.
            assert_eq!(chain(&n, 500, true), vec![(0x1000, -1)]);
        }
    }

    #[test]
    fn bad_scopes_are_errors_not_loops() {
        let mut n = nmethod(0);
        // A scope naming itself as its caller.
        let at = n.scopes.len() as i32;
        for v in [at as u32, 1, 1] {
            encode(v, 0, &mut n.scopes);
        }
        n.pcs.push((90, at));
        assert!(n.scopes_at(90, false).is_err());
        // A method index beyond the metadata.
        let at = n.scopes.len() as i32;
        for v in [0, 9, 1] {
            encode(v, 0, &mut n.scopes);
        }
        n.pcs.push((95, at));
        assert!(n.scopes_at(95, false).is_err());
        // A decode offset beyond the scopes: the method itself.
        n.pcs.push((99, 1 << 20));
        assert_eq!(chain(&n, 99, false), vec![(0x1000, -1)]);
    }
}
