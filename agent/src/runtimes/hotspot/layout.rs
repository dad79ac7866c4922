//! The HotSpot structures sonde reads, located through one JVM's own VMStructs: every offset and
//! size below comes from the running VM (no per-version table), and the few things VMStructs does not
//! describe are fixed for the supported versions and said where they are used (interpreter frame
//! slots, the compressed stream's excluded byte).
//!
//! Supported: OpenJDK 11 to 22 on x86_64, where a code blob keeps its code bounds as pointers and the
//! compiled method's metadata, scopes and PcDescs lie inside the blob. JDK 23 made the code bounds
//! offsets and moved the debug information out of the blob; sonde refuses it with that reason (as it
//! refuses JDK 10 and older, whose frames and code cache differ).

use super::vmstructs::VmStructs;

/// Oldest and newest major version sonde walks.
pub(crate) const SUPPORTED_MAJORS: std::ops::RangeInclusive<u32> = 11..=22;

/// The JVM's version, from `Abstract_VM_Version` (exported by every supported version; JDK 22
/// dropped `JDK_Version::_current`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    /// (major, minor, security, build): 17.0.15+6 is (17, 0, 15, 6).
    pub(crate) number: (u32, u32, u32, u32),
    /// `Abstract_VM_Version::_s_vm_release`, e.g. `17.0.15+6-Debian-1deb12u1`.
    pub(crate) release: String,
}

impl Version {
    /// The major version.
    pub(crate) fn major(&self) -> u32 {
        self.number.0
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.release.is_empty() {
            true => {
                let (major, minor, security, build) = self.number;
                write!(f, "{major}.{minor}.{security}+{build}")
            }
            false => f.write_str(&self.release),
        }
    }
}

/// The code cache: where its heaps are described.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeapLayout {
    /// Address of the static `CodeCache::_heaps` (a `GrowableArray<CodeHeap*>*`).
    pub(crate) heaps: u64,
    /// `GrowableArrayBase::_len` (`GenericGrowableArray` before JDK 16).
    pub(crate) array_len: u64,
    /// `GrowableArray<int>::_data` (the same for every element type).
    pub(crate) array_data: u64,
    /// `CodeHeap::_memory` (a `VirtualSpace`).
    pub(crate) memory: u64,
    /// `CodeHeap::_segmap` (a `VirtualSpace`).
    pub(crate) segmap: u64,
    /// `CodeHeap::_log2_segment_size`.
    pub(crate) log2_segment_size: u64,
    /// `VirtualSpace::_low_boundary`.
    pub(crate) low_boundary: u64,
    /// `VirtualSpace::_high_boundary`.
    pub(crate) high_boundary: u64,
    /// `sizeof(HeapBlock)`.
    pub(crate) heap_block_size: u64,
}

/// `CodeBlob`: every blob in the code cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlobLayout {
    /// `_name` (a `const char*`).
    pub(crate) name: u64,
    /// `_frame_size` (an int, in words).
    pub(crate) frame_size: u64,
    /// `_frame_complete_offset` (an int).
    pub(crate) frame_complete: u64,
    /// `_code_begin` (an address).
    pub(crate) code_begin: u64,
    /// `_code_end` (an address).
    pub(crate) code_end: u64,
}

/// `nmethod` (and `CompiledMethod`, its base class up to JDK 22): compiled Java code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NmethodLayout {
    /// `sizeof(nmethod)`: the header read at once.
    pub(crate) size: u64,
    /// `nmethod::_compile_id` (an int).
    pub(crate) compile_id: u64,
    /// `CompiledMethod::_method` (a `Method*`).
    pub(crate) method: u64,
    /// `CompiledMethod::_scopes_data_begin` (an address).
    pub(crate) scopes_data: u64,
    /// `CompiledMethod::_deopt_handler_begin` (an address).
    pub(crate) deopt_handler: u64,
    /// `nmethod::_orig_pc_offset` (an int).
    pub(crate) orig_pc_offset: u64,
    /// `nmethod::_metadata_offset` (an int, from the blob's start).
    pub(crate) metadata_offset: u64,
    /// `nmethod::_scopes_pcs_offset` (an int, from the blob's start).
    pub(crate) scopes_pcs_offset: u64,
    /// `nmethod::_dependencies_offset` (an int, from the blob's start): the PcDescs end there.
    pub(crate) dependencies_offset: u64,
}

/// `Method` and `ConstMethod`: a Java method and its immutable part (bytecodes, line table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MethodLayout {
    /// `Method::_constMethod`.
    pub(crate) const_method: u64,
    /// `sizeof(ConstMethod)`: the bytecodes follow it, then the compressed line number table.
    pub(crate) cm_size: u64,
    /// `ConstMethod::_constants` (a `ConstantPool*`).
    pub(crate) cm_constants: u64,
    /// `ConstMethod::_flags` (a u2 up to JDK 20, `_flags._flags`, a u4, from JDK 21; read as u2).
    pub(crate) cm_flags: u64,
    /// The flag of a method with a line number table.
    pub(crate) has_line_table: u16,
    /// `ConstMethod::_code_size` (a u2).
    pub(crate) cm_code_size: u64,
    /// `ConstMethod::_name_index` (a u2 into the constant pool).
    pub(crate) cm_name_index: u64,
}

/// `ConstantPool`, `Klass` and `Symbol`: names of classes, methods and source files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PoolLayout {
    /// `sizeof(ConstantPool)`: the entries (one word each) follow it.
    pub(crate) size: u64,
    /// `ConstantPool::_pool_holder` (an `InstanceKlass*`).
    pub(crate) holder: u64,
    /// `ConstantPool::_length` (an int): entries in the pool.
    pub(crate) length: u64,
    /// `ConstantPool::_source_file_name_index` (a u2; JDK 15+, `InstanceKlass::` before).
    pub(crate) source_file_index: PoolIndex,
    /// `Klass::_name` (a `Symbol*`).
    pub(crate) klass_name: u64,
    /// `Symbol::_length` (a u2; the high half of `_length_and_refcount` in JDK 11).
    pub(crate) symbol_length: u64,
    /// `Symbol::_body` (the bytes).
    pub(crate) symbol_body: u64,
}

/// Where the index of the source file's name is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolIndex {
    /// In the constant pool, at this offset (JDK 15 and later).
    InPool(u64),
    /// In the pool's holder (`InstanceKlass`), at this offset (JDK 11 to 14).
    InHolder(u64),
}

/// `PcDesc`: one entry of a compiled method's pc -> scope table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PcDescLayout {
    /// `sizeof(PcDesc)`.
    pub(crate) size: u64,
    /// `PcDesc::_pc_offset` (an int, from the code's start).
    pub(crate) pc_offset: u64,
    /// `PcDesc::_scope_decode_offset` (an int into the scopes data).
    pub(crate) scope_decode_offset: u64,
}

/// Everything sonde reads of one JVM build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) heap: HeapLayout,
    pub(crate) blob: BlobLayout,
    pub(crate) nmethod: NmethodLayout,
    pub(crate) method: MethodLayout,
    pub(crate) pool: PoolLayout,
    pub(crate) pc_desc: PcDescLayout,
    /// Bytes excluded from HotSpot's compressed streams (line tables, debug info): 0 up to JDK 20's
    /// early builds (J2SE Pack200 UNSIGNED5), 1 from JDK 20 build 15, whose `UNSIGNED5` class never
    /// writes a NUL byte (the OpenTelemetry profiler draws the same line).
    pub(crate) unsigned5_excluded: u8,
}

/// Why a JVM's layout is not one sonde reads (said to the user as is).
pub(crate) type Refusal = String;

impl Layout {
    /// The layout of the JVM whose VMStructs are `vms`, of version `version`.
    pub(crate) fn new(vms: &VmStructs, version: &Version) -> Result<Self, Refusal> {
        let major = version.major();
        if vms.field("CodeBlob", "_code_offset").is_some()
            || vms.field("nmethod", "_immutable_data").is_some()
        {
            return Err(
                "from JDK 23 code blobs keep their code bounds as offsets and compiled methods their debug information outside the code cache; sonde reads JDK 11 to 22"
                    .into(),
            );
        }
        if !SUPPORTED_MAJORS.contains(&major) {
            return Err(format!(
                "sonde walks JDK {} to {}",
                SUPPORTED_MAJORS.start(),
                SUPPORTED_MAJORS.end()
            ));
        }
        let off = |ty: &str, field: &str| -> Result<u64, Refusal> {
            vms.offset(ty, field)
                .ok_or_else(|| format!("its VMStructs have no {ty}::{field}"))
        };
        // CompiledMethod holds these up to JDK 22; nmethod where a build has no CompiledMethod.
        let compiled = |field: &str| -> Result<u64, Refusal> {
            off("CompiledMethod", field).or_else(|_| off("nmethod", field))
        };
        let size = |ty: &str| -> Result<u64, Refusal> {
            vms.size(ty)
                .filter(|&s| s > 0 && s <= MAX_TYPE_SIZE)
                .ok_or_else(|| format!("its VMStructs give no plausible sizeof({ty})"))
        };
        let heap = HeapLayout {
            heaps: vms
                .address("CodeCache", "_heaps")
                .ok_or("its VMStructs have no static CodeCache::_heaps")?,
            array_len: off("GrowableArrayBase", "_len")
                .or_else(|_| off("GenericGrowableArray", "_len"))?,
            array_data: off("GrowableArray<int>", "_data")?,
            memory: off("CodeHeap", "_memory")?,
            segmap: off("CodeHeap", "_segmap")?,
            log2_segment_size: off("CodeHeap", "_log2_segment_size")?,
            low_boundary: off("VirtualSpace", "_low_boundary")?,
            high_boundary: off("VirtualSpace", "_high_boundary")?,
            heap_block_size: size("HeapBlock")?,
        };
        let blob = BlobLayout {
            name: off("CodeBlob", "_name")?,
            frame_size: off("CodeBlob", "_frame_size")?,
            frame_complete: off("CodeBlob", "_frame_complete_offset")?,
            code_begin: off("CodeBlob", "_code_begin")?,
            code_end: off("CodeBlob", "_code_end")?,
        };
        let nmethod = NmethodLayout {
            size: size("nmethod")?,
            compile_id: off("nmethod", "_compile_id")?,
            method: compiled("_method")?,
            scopes_data: compiled("_scopes_data_begin")?,
            deopt_handler: compiled("_deopt_handler_begin")?,
            orig_pc_offset: off("nmethod", "_orig_pc_offset")?,
            metadata_offset: off("nmethod", "_metadata_offset")?,
            scopes_pcs_offset: off("nmethod", "_scopes_pcs_offset")?,
            dependencies_offset: off("nmethod", "_dependencies_offset")?,
        };
        let has_line_table = vms
            .int("ConstMethod::_has_linenumber_table")
            .or_else(|| vms.int("ConstMethodFlags::_misc_has_linenumber_table"))
            .and_then(|f| u16::try_from(f).ok().filter(|f| f.count_ones() == 1))
            .ok_or("its VMStructs do not say which ConstMethod flag marks a line number table")?;
        let method = MethodLayout {
            const_method: off("Method", "_constMethod")?,
            cm_size: size("ConstMethod")?,
            cm_constants: off("ConstMethod", "_constants")?,
            cm_flags: off("ConstMethod", "_flags")
                .or_else(|_| off("ConstMethod", "_flags._flags"))?,
            has_line_table,
            cm_code_size: off("ConstMethod", "_code_size")?,
            cm_name_index: off("ConstMethod", "_name_index")?,
        };
        let pool = PoolLayout {
            size: size("ConstantPool")?,
            holder: off("ConstantPool", "_pool_holder")?,
            length: off("ConstantPool", "_length")?,
            source_file_index: match off("ConstantPool", "_source_file_name_index") {
                Ok(o) => PoolIndex::InPool(o),
                Err(_) => PoolIndex::InHolder(off("InstanceKlass", "_source_file_name_index")?),
            },
            klass_name: off("Klass", "_name")?,
            // JDK 11 packs the length in the high half of `_length_and_refcount` (little-endian:
            // 2 bytes in); later versions have `_length` of their own.
            symbol_length: off("Symbol", "_length")
                .or_else(|_| off("Symbol", "_length_and_refcount").map(|o| o + 2))?,
            symbol_body: off("Symbol", "_body")?,
        };
        let pc_desc = PcDescLayout {
            size: size("PcDesc")?,
            pc_offset: off("PcDesc", "_pc_offset")?,
            scope_decode_offset: off("PcDesc", "_scope_decode_offset")?,
        };
        // The interpreter's frame slots are not exported; check the one neighbour that is (JDK 11 to
        // 21 export it) against the layout `detect::INTERP_*_SLOT` assume.
        if let Some(last_sp) = vms.int("frame::interpreter_frame_last_sp_offset")
            && last_sp != -2
        {
            return Err(format!(
                "its interpreter frames differ from x86_64's (last sp at word {last_sp}, not -2)"
            ));
        }
        let layout = Self {
            heap,
            blob,
            nmethod,
            method,
            pool,
            pc_desc,
            unsigned5_excluded: u8::from(version.number >= (20, 0, 0, 15)),
        };
        layout.check()?;
        Ok(layout)
    }

    /// Refuses offsets no real HotSpot has, so later reads stay within what was read: every field
    /// inside its structure's size, and each structure of bounded size.
    fn check(&self) -> Result<(), Refusal> {
        let within = |what: &str, off: u64, width: u64, size: u64| -> Result<(), Refusal> {
            match off.checked_add(width) {
                Some(end) if end <= size => Ok(()),
                _ => Err(format!(
                    "{what} at {off} lies outside its structure of {size} bytes"
                )),
            }
        };
        let n = &self.nmethod;
        for (what, off, width) in [
            ("nmethod::_compile_id", n.compile_id, 4),
            ("CompiledMethod::_method", n.method, 8),
            ("CompiledMethod::_scopes_data_begin", n.scopes_data, 8),
            ("CompiledMethod::_deopt_handler_begin", n.deopt_handler, 8),
            ("nmethod::_orig_pc_offset", n.orig_pc_offset, 4),
            ("nmethod::_metadata_offset", n.metadata_offset, 4),
            ("nmethod::_scopes_pcs_offset", n.scopes_pcs_offset, 4),
            ("nmethod::_dependencies_offset", n.dependencies_offset, 4),
            ("CodeBlob::_name", self.blob.name, 8),
            ("CodeBlob::_code_begin", self.blob.code_begin, 8),
            ("CodeBlob::_code_end", self.blob.code_end, 8),
            ("CodeBlob::_frame_size", self.blob.frame_size, 4),
            (
                "CodeBlob::_frame_complete_offset",
                self.blob.frame_complete,
                4,
            ),
        ] {
            within(what, off, width, n.size)?;
        }
        let m = &self.method;
        within("ConstMethod::_constants", m.cm_constants, 8, m.cm_size)?;
        within("ConstMethod::_flags", m.cm_flags, 2, m.cm_size)?;
        within("ConstMethod::_code_size", m.cm_code_size, 2, m.cm_size)?;
        within("ConstMethod::_name_index", m.cm_name_index, 2, m.cm_size)?;
        within("Method::_constMethod", m.const_method, 8, MAX_TYPE_SIZE)?;
        let p = &self.pool;
        within("ConstantPool::_pool_holder", p.holder, 8, p.size)?;
        within("ConstantPool::_length", p.length, 4, p.size)?;
        match p.source_file_index {
            PoolIndex::InPool(o) => within("ConstantPool::_source_file_name_index", o, 2, p.size)?,
            PoolIndex::InHolder(o) => within(
                "InstanceKlass::_source_file_name_index",
                o,
                2,
                MAX_TYPE_SIZE,
            )?,
        }
        within("Klass::_name", p.klass_name, 8, MAX_TYPE_SIZE)?;
        within("Symbol::_length", p.symbol_length, 2, MAX_SYMBOL_HEADER)?;
        within("Symbol::_body", p.symbol_body, 0, MAX_SYMBOL_HEADER)?;
        let d = &self.pc_desc;
        within("PcDesc::_pc_offset", d.pc_offset, 4, d.size)?;
        within(
            "PcDesc::_scope_decode_offset",
            d.scope_decode_offset,
            4,
            d.size,
        )?;
        let h = &self.heap;
        for (what, off, width) in [
            ("GrowableArray::_len", h.array_len, 4),
            ("GrowableArray::_data", h.array_data, 8),
            ("CodeHeap::_log2_segment_size", h.log2_segment_size, 4),
            (
                "CodeHeap::_memory._high_boundary",
                h.memory + h.high_boundary,
                8,
            ),
            (
                "CodeHeap::_segmap._low_boundary",
                h.segmap + h.low_boundary,
                8,
            ),
        ] {
            within(what, off, width, MAX_TYPE_SIZE)?;
        }
        within("sizeof(HeapBlock)", 0, h.heap_block_size, 64)?;
        Ok(())
    }
}

/// Largest structure sonde reads at once (`nmethod` is under 400 bytes, `InstanceKlass` under 500).
pub(crate) const MAX_TYPE_SIZE: u64 = 4096;
/// Largest `Symbol` header (8 bytes in every supported version).
const MAX_SYMBOL_HEADER: u64 = 32;
