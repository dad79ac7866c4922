//! The running kernel's BTF (`/sys/kernel/btf/vmlinux`), read for the struct layouts the kernel
//! programs need and cannot get from CO-RE: the byte offset of `thread.fsbase` in `task_struct`, which
//! the CPython 3.9/3.10 walk compares with `PyThreadState.thread_id` (glibc's pthread_self() is the
//! thread's x86_64 fs base), and the VMA, file and inode members the recording of executable mappings
//! reads (`VmaLayout`). Layouts differ per kernel build, so offsets are looked up once at load.
//!
//! aya 0.14 keeps its BTF accessors crate-private, hence this small reader of the format documented in
//! the kernel's `Documentation/bpf/btf.rst`. It trusts nothing in the blob: every read is bounds-checked,
//! type chains are length-capped, and a malformed or truncated blob is an error, never a panic. Only the
//! host's byte order is read (the kernel writes its BTF in its own, which is the host's).

mod vmlinux;

use std::{io, path::PathBuf};

pub(crate) use vmlinux::{KernelBtf, read_vmlinux};

/// What losing the thread pointer's offset costs (the loader appends it when it logs the error).
pub(crate) const THREAD_POINTER_CONSEQUENCE: &str = "sonde cannot match threads to their CPython 3.9/3.10 thread state, so \
     Python 3.9/3.10 threads that do not hold the GIL keep native frames only";

const BTF_MAGIC: u16 = 0xeb9f;
const BTF_VERSION: u8 = 1;
/// `struct btf_header` up to `str_len`; later kernels may append fields, hence `hdr_len`.
const HEADER_LEN: usize = 24;
/// `struct btf_type`: name_off, info, size_or_type.
const TYPE_LEN: usize = 12;
/// Type ids are 20 bits wide (`BTF_MAX_TYPE`); also bounds the index built here.
const MAX_TYPES: usize = 0x000f_ffff;
/// Longest typedef/const/volatile/array chain followed before calling the blob cyclic.
const MAX_CHAIN: usize = 32;
/// Deepest nesting of anonymous struct/union members searched for a member name.
const MAX_ANON_DEPTH: usize = 8;
/// `sizeof(void *)` on x86_64: BTF does not record pointer sizes.
const POINTER_SIZE: u32 = 8;

// BTF_KIND_* (include/uapi/linux/btf.h).
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;
const KIND_MAX: u32 = KIND_ENUM64;

/// Why the offset of a kernel struct member could not be found in the kernel's BTF.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BtfError {
    /// The BTF file is missing or unreadable.
    #[error(
        "cannot read the kernel's BTF at {} ({source}): the kernel must be built with CONFIG_DEBUG_INFO_BTF=y (in a container, give sonde the host's /sys)",
        path.display()
    )]
    Unreadable {
        /// The file tried.
        path: PathBuf,
        /// The read error.
        #[source]
        source: io::Error,
    },
    /// The blob does not start with the BTF magic.
    #[error(
        "the kernel's BTF does not start with the BTF magic 0xeb9f (found {found:#06x}{swapped}): it is not BTF or is corrupt"
    )]
    BadMagic {
        /// The first two bytes, in host order.
        found: u16,
        /// Set when the magic is there in the other byte order.
        swapped: &'static str,
    },
    /// A BTF version this reader does not know.
    #[error("the kernel's BTF has version {version}, sonde reads version 1")]
    Version {
        /// The header's version.
        version: u8,
    },
    /// A header field, type or string points past the end of its section.
    #[error("the kernel's BTF is truncated or corrupt ({what} runs past the end of the data)")]
    Truncated {
        /// What was being read.
        what: String,
    },
    /// A type of a kind newer than this reader, whose length is therefore unknown.
    #[error(
        "the kernel's BTF has type {id} of kind {kind}, newer than sonde knows (up to {KIND_MAX}): update sonde"
    )]
    UnknownKind {
        /// The type id.
        id: u32,
        /// Its kind.
        kind: u32,
    },
    /// A type id that is not in the blob, or a chain of types that never ends.
    #[error("the kernel's BTF is corrupt ({what})")]
    BadType {
        /// What is wrong.
        what: String,
    },
    /// No struct of that name.
    #[error("the kernel's BTF has no struct {name}")]
    MissingStruct {
        /// The struct looked for.
        name: String,
    },
    /// The struct (or a member's struct) lacks the member.
    #[error(
        "{container} in the kernel's BTF has no member {member} (another architecture or an unusual kernel build)"
    )]
    MissingMember {
        /// The path up to the member, e.g. `task_struct.thread`.
        container: String,
        /// The member looked for.
        member: String,
    },
    /// A member in the middle of the path is not a struct or union.
    #[error("{path} in the kernel's BTF is not a struct or union")]
    NotAStruct {
        /// The path up to that member.
        path: String,
    },
    /// The member is a bitfield or does not start on a byte.
    #[error(
        "{path} in the kernel's BTF is at bit {bit_offset} (a bitfield or not byte-aligned), not readable as a word"
    )]
    Unaligned {
        /// The path up to the member.
        path: String,
        /// Its bit offset in its parent.
        bit_offset: u64,
    },
    /// The member exists but is not the size of the word the kernel program reads.
    #[error("{path} in the kernel's BTF is {size} bytes, not the word the kernel program reads")]
    NotAWord {
        /// The member path.
        path: String,
        /// Its size in bytes.
        size: u32,
    },
}

/// Byte offset of the 8-byte member `path` (a pointer or a `u64`, which the kernel programs read
/// as a word: the thread pointer of `platform::arch::THREAD_POINTER_IN_TASK`, `task_struct.stack`)
/// from the running kernel's BTF `blob`.
pub(crate) fn word_offset(blob: &[u8], path: &[&str]) -> Result<u32, BtfError> {
    let member = member_layout(&Btf::parse(blob)?, path)?;
    // The kernel program reads a u64 there; anything else means the layout is not what it expects.
    if member.size != 8 {
        return Err(BtfError::NotAWord {
            path: path.join("."),
            size: member.size,
        });
    }
    Ok(member.offset)
}

/// The members the kernel's VMA lookup reads (`sonde_abi::VmaLayout`), with the size each must have:
/// the kernel program reads `u64` words and the 32-bit `dev_t`.
const VMA_MEMBERS: [(&[&str], u32); 13] = [
    (&["vm_area_struct", "vm_start"], 8),
    (&["vm_area_struct", "vm_end"], 8),
    (&["vm_area_struct", "vm_pgoff"], 8),
    (&["vm_area_struct", "vm_file"], 8),
    (&["vm_area_struct", "vm_flags"], 8),
    (&["file", "f_inode"], 8),
    (&["inode", "i_ino"], 8),
    (&["inode", "i_sb"], 8),
    (&["super_block", "s_dev"], 4),
    (&["task_struct", "mm"], 8),
    (&["mm_struct", "start_code"], 8),
    (&["task_struct", "group_leader"], 8),
    (&["task_struct", "start_time"], 8),
];

/// Offsets of the kernel structure members the VMA lookup reads, from the running kernel's BTF (the
/// tracepoint fields are left 0 for the loader to fill from tracefs).
pub(crate) fn vma_layout(blob: &[u8]) -> Result<sonde_abi::VmaLayout, BtfError> {
    let btf = Btf::parse(blob)?;
    let mut offsets = [0u32; VMA_MEMBERS.len()];
    for (slot, (path, size)) in offsets.iter_mut().zip(VMA_MEMBERS) {
        let member = member_layout(&btf, path)?;
        if member.size != size {
            return Err(BtfError::NotAWord {
                path: path.join("."),
                size: member.size,
            });
        }
        *slot = member.offset;
    }
    let [
        vm_start,
        vm_end,
        vm_pgoff,
        vm_file,
        vm_flags,
        f_inode,
        i_ino,
        i_sb,
        s_dev,
        task_mm,
        mm_start_code,
        task_group_leader,
        task_start_time,
    ] = offsets;
    Ok(sonde_abi::VmaLayout {
        vm_start,
        vm_end,
        vm_pgoff,
        vm_file,
        f_inode,
        i_ino,
        i_sb,
        s_dev,
        vm_flags,
        task_mm,
        mm_start_code,
        task_group_leader,
        task_start_time,
        fork_child_pid: 0,
        mmap_ret: 0,
    })
}

/// Byte offset of the member chain `path[1..]` from the start of struct `path[0]`: the offset of
/// `path[1]` in `path[0]`, plus that of `path[2]` in `path[1]`'s struct, and so on. Typedefs and
/// qualifiers are followed to the struct, and members of anonymous structs and unions are found as C
/// finds them.
// word_offset() also needs the member's size, so it calls member_layout(); the tests query paths
// with this.
#[cfg(test)]
pub(crate) fn member_offset_path(btf: &[u8], path: &[&str]) -> Result<u32, BtfError> {
    member_layout(&Btf::parse(btf)?, path).map(|m| m.offset)
}

/// Where a member chain ends up: its byte offset and the size of its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemberLayout {
    offset: u32,
    size: u32,
}

/// [`member_offset_path`] with the size of the last member's type (of `path[0]` itself for a
/// one-element path).
fn member_layout(btf: &Btf<'_>, path: &[&str]) -> Result<MemberLayout, BtfError> {
    let Some((root, members)) = path.split_first() else {
        return Err(BtfError::MissingStruct {
            name: String::new(),
        });
    };
    let mut container = btf
        .find_struct(root)?
        .ok_or_else(|| BtfError::MissingStruct {
            name: (*root).to_owned(),
        })?;
    // In bits, summed as u64: a corrupt blob cannot overflow 64 bits in a handful of u32 additions.
    let mut bit_offset = 0u64;
    let mut walked = (*root).to_owned();
    for member in members {
        let ty = btf.resolve(container)?;
        if !matches!(ty.kind(), KIND_STRUCT | KIND_UNION) {
            return Err(BtfError::NotAStruct { path: walked });
        }
        let found =
            btf.find_member(container, member, 0)?
                .ok_or_else(|| BtfError::MissingMember {
                    container: walked.clone(),
                    member: (*member).to_owned(),
                })?;
        walked.push('.');
        walked.push_str(member);
        // The kernel program reads whole words: a bitfield or a member inside a byte will not do.
        if found.bitfield_size != 0 || !found.bit_offset.is_multiple_of(8) {
            return Err(BtfError::Unaligned {
                path: walked,
                bit_offset: found.bit_offset,
            });
        }
        bit_offset += found.bit_offset;
        container = found.ty;
    }
    let offset = u32::try_from(bit_offset / 8).map_err(|_| BtfError::BadType {
        what: format!("the offset of {walked} is beyond 4 GiB"),
    })?;
    Ok(MemberLayout {
        offset,
        size: btf.size_of(container)?,
    })
}

/// A parsed BTF blob: the type and string sections, and where each type starts.
struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// `starts[id - 1]` is the offset of type `id` in `types` (type 0 is `void`, not stored).
    starts: Vec<u32>,
}

/// A struct or union member, from its `struct btf_member`.
#[derive(Debug, Clone, Copy)]
struct Member {
    /// From the start of the struct searched (anonymous members' offsets added).
    bit_offset: u64,
    /// 0 unless a bitfield.
    bitfield_size: u32,
    ty: u32,
}

/// One `struct btf_type` header.
#[derive(Debug, Clone, Copy)]
struct TypeHeader {
    id: u32,
    name_off: u32,
    info: u32,
    size_or_type: u32,
    /// Offset of the kind-specific data after the header, in the type section.
    data: usize,
}

impl TypeHeader {
    fn kind(&self) -> u32 {
        (self.info >> 24) & 0x1f
    }

    fn vlen(&self) -> usize {
        (self.info & 0xffff) as usize
    }

    fn kind_flag(&self) -> bool {
        self.info >> 31 != 0
    }
}

impl<'a> Btf<'a> {
    /// Checks the header and indexes every type in one pass.
    fn parse(blob: &'a [u8]) -> Result<Self, BtfError> {
        let header = |at: usize| word(blob, at).ok_or_else(|| truncated("the header"));
        let magic = u16::from_ne_bytes(read(blob, 0).ok_or_else(|| truncated("the header"))?);
        if magic != BTF_MAGIC {
            return Err(BtfError::BadMagic {
                found: magic,
                swapped: if magic.swap_bytes() == BTF_MAGIC {
                    ", the BTF magic in the other byte order: BTF of another architecture"
                } else {
                    ""
                },
            });
        }
        let [version] = read(blob, 2).ok_or_else(|| truncated("the header"))?;
        if version != BTF_VERSION {
            return Err(BtfError::Version { version });
        }
        let hdr_len = header(4)? as usize;
        if hdr_len < HEADER_LEN {
            return Err(truncated(format!(
                "a header of {hdr_len} bytes, shorter than {HEADER_LEN}"
            )));
        }
        let section = |off_at: usize, name: &str| -> Result<&'a [u8], BtfError> {
            let (off, len) = (header(off_at)? as usize, header(off_at + 4)? as usize);
            blob.get(hdr_len..)
                .and_then(|b| b.get(off..off.checked_add(len)?))
                .ok_or_else(|| truncated(format!("the {name} section ({len} bytes at {off})")))
        };
        let types = section(8, "type")?;
        let strings = section(16, "string")?;
        let mut btf = Btf {
            types,
            strings,
            starts: Vec::new(),
        };
        let mut at = 0usize;
        while at < types.len() {
            let start = at as u32; // The section's length is a u32.
            if btf.starts.len() >= MAX_TYPES {
                return Err(BtfError::BadType {
                    what: format!("more than {MAX_TYPES} types"),
                });
            }
            let id = btf.starts.len() as u32 + 1;
            let header = btf.header_at(id, at)?;
            at = header.data + btf.data_len(&header)?;
            if at > types.len() {
                return Err(truncated(format!("type {id}")));
            }
            btf.starts.push(start);
        }
        Ok(btf)
    }

    /// Reads the header of type `id` at `at` in the type section.
    fn header_at(&self, id: u32, at: usize) -> Result<TypeHeader, BtfError> {
        Ok(TypeHeader {
            id,
            name_off: self.word(at, id)?,
            info: self.word(at + 4, id)?,
            size_or_type: self.word(at + 8, id)?,
            data: at + TYPE_LEN,
        })
    }

    /// The word at `at` in the type section, part of type `id`.
    fn word(&self, at: usize, id: u32) -> Result<u32, BtfError> {
        word(self.types, at).ok_or_else(|| truncated(format!("type {id}")))
    }

    /// Length of the kind-specific data that follows a type's header.
    fn data_len(&self, t: &TypeHeader) -> Result<usize, BtfError> {
        let vlen = t.vlen();
        Ok(match t.kind() {
            KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
            KIND_ARRAY => 12,
            KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
            KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
            kind if kind > KIND_MAX => return Err(BtfError::UnknownKind { id: t.id, kind }),
            // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG (and UNKN).
            _ => 0,
        })
    }

    /// The header of type `id` (not `void`).
    fn get(&self, id: u32) -> Result<TypeHeader, BtfError> {
        let at = id
            .checked_sub(1)
            .and_then(|i| self.starts.get(i as usize))
            .ok_or_else(|| BtfError::BadType {
                what: format!("type id {id} is not defined ({} types)", self.starts.len()),
            })?;
        self.header_at(id, *at as usize)
    }

    /// The NUL-terminated string at `off` in the string section, as bytes.
    fn name(&self, off: u32) -> Result<&'a [u8], BtfError> {
        let tail = self
            .strings
            .get(off as usize..)
            .ok_or_else(|| truncated(format!("name offset {off}")))?;
        let end = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| truncated(format!("the name at {off}")))?;
        Ok(&tail[..end])
    }

    /// The first struct named `name`: vmlinux BTF is deduplicated, so there is one.
    fn find_struct(&self, name: &str) -> Result<Option<u32>, BtfError> {
        for id in 1..=self.starts.len() as u32 {
            let t = self.get(id)?;
            if t.kind() == KIND_STRUCT && self.name(t.name_off)? == name.as_bytes() {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Follows typedefs and qualifiers from `id` to the type they name.
    fn resolve(&self, mut id: u32) -> Result<TypeHeader, BtfError> {
        for _ in 0..MAX_CHAIN {
            let t = self.get(id)?;
            match t.kind() {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type;
                }
                _ => return Ok(t),
            }
        }
        Err(BtfError::BadType {
            what: format!("type {id} is at the end of a typedef chain longer than {MAX_CHAIN}"),
        })
    }

    /// Member `name` of struct or union `container`, searching anonymous struct/union members as C
    /// does (their offsets added).
    fn find_member(
        &self,
        container: u32,
        name: &str,
        depth: usize,
    ) -> Result<Option<Member>, BtfError> {
        let t = self.resolve(container)?;
        if depth > MAX_ANON_DEPTH || !matches!(t.kind(), KIND_STRUCT | KIND_UNION) {
            return Ok(None);
        }
        for i in 0..t.vlen() {
            // struct btf_member { name_off, type, offset }
            let member_at = t.data + 12 * i;
            let name_off = self.word(member_at, t.id)?;
            let ty = self.word(member_at + 4, t.id)?;
            let raw_offset = self.word(member_at + 8, t.id)?;
            // With kind_flag, the top 8 bits hold the bitfield size (0 for an ordinary member).
            let (bit_offset, bitfield_size) = if t.kind_flag() {
                (raw_offset & 0x00ff_ffff, raw_offset >> 24)
            } else {
                (raw_offset, 0)
            };
            let member = Member {
                bit_offset: u64::from(bit_offset),
                bitfield_size,
                ty,
            };
            let member_name = self.name(name_off)?;
            if member_name == name.as_bytes() {
                return Ok(Some(member));
            }
            if member_name.is_empty()
                && bitfield_size == 0
                && let Some(inner) = self.find_member(ty, name, depth + 1)?
            {
                return Ok(Some(Member {
                    bit_offset: member.bit_offset + inner.bit_offset,
                    ..inner
                }));
            }
        }
        Ok(None)
    }

    /// Size in bytes of type `id`.
    fn size_of(&self, id: u32) -> Result<u32, BtfError> {
        let mut id = id;
        let mut count = 1u32;
        for _ in 0..MAX_CHAIN {
            let t = self.resolve(id)?;
            let element = match t.kind() {
                KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FLOAT
                | KIND_DATASEC => t.size_or_type,
                KIND_PTR => POINTER_SIZE,
                KIND_ARRAY => {
                    // struct btf_array { type, index_type, nelems }
                    let elem = self.word(t.data, t.id)?;
                    let nelems = self.word(t.data + 8, t.id)?;
                    count = count.checked_mul(nelems).ok_or_else(|| overflow(t.id))?;
                    id = elem;
                    continue;
                }
                kind => {
                    return Err(BtfError::BadType {
                        what: format!("type {} of kind {kind} has no size", t.id),
                    });
                }
            };
            return count.checked_mul(element).ok_or_else(|| overflow(t.id));
        }
        Err(BtfError::BadType {
            what: format!("array type {id} nests deeper than {MAX_CHAIN}"),
        })
    }
}

fn truncated(what: impl Into<String>) -> BtfError {
    BtfError::Truncated { what: what.into() }
}

fn overflow(id: u32) -> BtfError {
    BtfError::BadType {
        what: format!("the size of type {id} overflows"),
    }
}

fn read<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn word(b: &[u8], at: usize) -> Option<u32> {
    read(b, at).map(u32::from_ne_bytes)
}

#[cfg(test)]
mod tests;
