//! Finding HotSpot in a captured process: a mapped `libjvm.so` exporting VMStructs (found in
//! `.dynsym` by `super::elf`), its version, the layout of the structures sonde reads
//! (`layout`), and the kernel's settings for the process (`HS_PROCS`): the code heaps, as the code
//! cache lists them, and the offsets the frame walker needs.
//!
//! A JVM is usually first sampled while it starts, before its code cache exists: that is
//! [`HotspotError::NotReady`], which the process table retries (`process::java`), not a refusal.

use sonde_abi::hotspot::{BLOB_SPAN_MAX, CodeHeap, HsProc, MAX_CODE_HEAPS};

use super::{
    layout::{Layout, Version},
    vmstructs::{self, VmStructs, VmStructsError},
};
use std::sync::Arc;

use super::elf::HotspotSymbols;
use crate::{
    process::binary::{Binary, Mapping},
    runtimes::memory::ProcessMemory,
};

/// Words below rbp where an x86_64 interpreter frame keeps its `Method*` (`frame_x86.hpp`:
/// `interpreter_frame_method_offset = -3`, the same from JDK 9 to 22).
pub(crate) const INTERP_METHOD_SLOT: u16 = 3;
/// Words below rbp where an x86_64 interpreter frame keeps its bytecode pointer
/// (`interpreter_frame_bcp_offset = -8` from JDK 9, which added the mirror slot; -7 in JDK 8,
/// which sonde does not walk).
pub(crate) const INTERP_BCP_SLOT: u16 = 8;
/// log2 of the segment sizes accepted: HotSpot's `CodeCacheSegmentSize` is 64 or 128 by default, at
/// least the code alignment (32) and in practice never above 1 KiB.
const SEGMENT_SHIFTS: std::ops::RangeInclusive<u32> = 5..=10;
/// Longest version string read.
const MAX_RELEASE: usize = 128;

/// Why a JVM was found but cannot be walked (yet).
#[derive(Debug, thiserror::Error)]
pub(crate) enum HotspotError {
    /// A version or layout sonde does not read.
    #[error(
        "{binary} is HotSpot {version}, which sonde does not walk: {why}; its Java frames stay [jit] (native frames are still shown)"
    )]
    Unsupported {
        /// The `libjvm.so`.
        binary: String,
        /// Its version, as far as it is known.
        version: String,
        /// Why, for the user.
        why: String,
    },
    /// The JVM has not set up its code cache yet: try again later.
    #[error(
        "the JVM in process {pid} has no code heap yet (it is starting); sonde looks again shortly"
    )]
    NotReady {
        /// The process.
        pid: u32,
    },
    /// The process's memory could not be read (it exited, or sonde lacks CAP_SYS_PTRACE).
    #[error("reading the JVM of process {pid}: {source}")]
    Unreadable {
        /// The process.
        pid: u32,
        /// The read's error.
        #[source]
        source: VmStructsError,
    },
}

/// A HotSpot JVM found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Jvm {
    /// Path of its `libjvm.so`.
    pub(crate) binary: String,
    /// Its version.
    pub(crate) version: Version,
    /// Where its structures' fields are.
    pub(crate) layout: Layout,
    /// What the kernel walks its frames with.
    settings: HsProc,
    /// The `libjvm.so` it was read from, (device, inode), and its load bias: a later capture of the
    /// process with the same is the same JVM (see [`Jvm::same_image`]).
    image: ((u64, u64), u64),
}

impl Jvm {
    /// Whether `mappings` (a later capture of the process) run the JVM this was read from: a capture
    /// after new code was mapped keeps it, and with it every name read through it; an exec does not.
    pub(crate) fn same_image(&self, mappings: &[Mapping]) -> bool {
        libjvm(mappings).is_some_and(|(binary, _, bias)| (binary.id, bias) == self.image)
    }

    /// What the kernel needs to walk this JVM's frames (`HS_PROCS`).
    pub(crate) fn kernel_settings(&self) -> HsProc {
        self.settings
    }

    /// The code heaps in use.
    pub(crate) fn heaps(&self) -> &[CodeHeap] {
        &self.settings.heaps[..self.settings.heap_count as usize]
    }
}

/// The HotSpot JVM of process `pid`, given its executable mappings: Ok(None) when it has none.
pub(crate) fn detect(pid: u32, mappings: &[Mapping]) -> Result<Option<Jvm>, HotspotError> {
    let Some((binary, symbols, bias)) = libjvm(mappings) else {
        return Ok(None);
    };
    let image = (binary.id, bias);
    let path = binary.path.clone();
    let mem = ProcessMemory::new(pid);
    let unsupported = |version: &str, why: String| HotspotError::Unsupported {
        binary: path.clone(),
        version: version.to_owned(),
        why,
    };
    let vms = VmStructs::read(&mem, symbols, bias).map_err(|e| match e {
        VmStructsError::NotReady => HotspotError::NotReady { pid },
        VmStructsError::Memory { .. } => HotspotError::Unreadable { pid, source: e },
        VmStructsError::Missing { .. } | VmStructsError::Implausible { .. } => {
            unsupported("(unknown version)", e.to_string())
        }
    })?;
    let version = version(&mem, &vms).map_err(|e| match e {
        VmStructsError::Memory { .. } => HotspotError::Unreadable { pid, source: e },
        _ => unsupported("(unknown version)", e.to_string()),
    })?;
    let layout =
        Layout::new(&vms, &version).map_err(|why| unsupported(&version.to_string(), why))?;
    let heaps = code_heaps(&mem, &layout).map_err(|e| match e {
        HeapError::NotReady => HotspotError::NotReady { pid },
        HeapError::Memory(source) => HotspotError::Unreadable { pid, source },
        HeapError::Unsupported(why) => unsupported(&version.to_string(), why),
    })?;
    let settings =
        settings(&layout, &heaps).map_err(|why| unsupported(&version.to_string(), why))?;
    Ok(Some(Jvm {
        binary: path,
        version,
        layout,
        settings,
        image,
    }))
}

/// The mapped binary exporting HotSpot's VMStructs, its symbols and its load bias.
fn libjvm(mappings: &[Mapping]) -> Option<(&Arc<Binary>, &HotspotSymbols, u64)> {
    mappings.iter().find_map(|m| {
        let binary = m.binary.as_ref()?;
        let symbols = binary.fact::<HotspotSymbols>(super::NAME)?;
        let bias = crate::process::load_bias::load_bias(
            m.module.start,
            m.module.file_offset,
            &binary.elf.segments,
        );
        Some((binary, symbols, bias))
    })
}

/// The JVM's version, from `Abstract_VM_Version`'s statics.
fn version(mem: &ProcessMemory, vms: &VmStructs) -> Result<Version, VmStructsError> {
    let int = |field: &'static str| -> Result<u32, VmStructsError> {
        let addr = vms
            .address("Abstract_VM_Version", field)
            .ok_or(VmStructsError::Missing { name: field })?;
        let mut b = [0; 4];
        mem.read(addr, &mut b)
            .map_err(|source| VmStructsError::Memory {
                what: field,
                addr,
                source,
            })?;
        Ok(u32::from_le_bytes(b))
    };
    let number = (
        int("_vm_major_version")?,
        int("_vm_minor_version")?,
        int("_vm_security_version")?,
        int("_vm_build_number")?,
    );
    // The release string is for messages only: a JVM without it is still walked.
    let release = vms
        .address("Abstract_VM_Version", "_s_vm_release")
        .and_then(|addr| mem.u64(addr).ok())
        .filter(|&p| p != 0)
        .and_then(|p| vmstructs::c_string(mem, p, MAX_RELEASE).ok())
        .unwrap_or_default();
    Ok(Version { number, release })
}

/// Why the code heaps could not be listed.
enum HeapError {
    /// The code cache is not set up yet.
    NotReady,
    /// A read failed.
    Memory(VmStructsError),
    /// A code cache sonde's kernel side cannot take.
    Unsupported(String),
}

/// The code heaps listed by `CodeCache::_heaps`, with their common segment shift.
fn code_heaps(mem: &ProcessMemory, layout: &Layout) -> Result<(Vec<CodeHeap>, u32), HeapError> {
    let h = &layout.heap;
    let u64_at = |what: &'static str, addr: u64| {
        mem.u64(addr)
            .map_err(|source| HeapError::Memory(VmStructsError::Memory { what, addr, source }))
    };
    let i32_at = |what: &'static str, addr: u64| {
        let mut b = [0; 4];
        mem.read(addr, &mut b)
            .map_err(|source| HeapError::Memory(VmStructsError::Memory { what, addr, source }))?;
        Ok(i32::from_le_bytes(b))
    };
    let array = u64_at("CodeCache::_heaps", h.heaps)?;
    if array == 0 {
        return Err(HeapError::NotReady);
    }
    let len = i32_at("the code heap count", array + h.array_len)?;
    let data = u64_at("the code heap array", array + h.array_data)?;
    if len == 0 || data == 0 {
        return Err(HeapError::NotReady);
    }
    let count = usize::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_CODE_HEAPS)
        .ok_or_else(|| {
            HeapError::Unsupported(format!(
                "its code cache has {len} heaps, sonde's kernel side takes up to {MAX_CODE_HEAPS}"
            ))
        })?;
    let mut heaps = Vec::with_capacity(count);
    let mut shift = None;
    for i in 0..count as u64 {
        let heap = u64_at("a code heap pointer", data + 8 * i)?;
        if heap == 0 {
            return Err(HeapError::NotReady);
        }
        let low = u64_at("a code heap's start", heap + h.memory + h.low_boundary)?;
        let high = u64_at("a code heap's end", heap + h.memory + h.high_boundary)?;
        let segmap = u64_at(
            "a code heap's segment map",
            heap + h.segmap + h.low_boundary,
        )?;
        let log2 = i32_at("a code heap's segment size", heap + h.log2_segment_size)?;
        if low == 0 || high <= low || segmap == 0 {
            // Reserved but not yet set up.
            return Err(HeapError::NotReady);
        }
        let log2 = u32::try_from(log2)
            .ok()
            .filter(|s| SEGMENT_SHIFTS.contains(s))
            .ok_or_else(|| {
                HeapError::Unsupported(format!("a code heap has segments of 2^{log2} bytes"))
            })?;
        if *shift.get_or_insert(log2) != log2 {
            return Err(HeapError::Unsupported(
                "its code heaps have different segment sizes".into(),
            ));
        }
        heaps.push(CodeHeap { low, high, segmap });
    }
    heaps.sort_by_key(|h| h.low);
    if heaps.windows(2).any(|w| w[0].high > w[1].low) {
        return Err(HeapError::Unsupported(
            "its code heaps overlap (implausible)".into(),
        ));
    }
    Ok((heaps, shift.expect("at least one heap")))
}

/// The kernel's settings for a JVM of `layout` whose code heaps are `heaps`.
fn settings(layout: &Layout, (heaps, shift): &(Vec<CodeHeap>, u32)) -> Result<HsProc, String> {
    let (b, n) = (&layout.blob, &layout.nmethod);
    // Every blob field the kernel reads, with its width: the span read at once covers them all.
    let fields = [
        (b.name, 8),
        (b.frame_size, 4),
        (b.frame_complete, 4),
        (b.code_begin, 8),
        (b.code_end, 8),
        (n.compile_id, 4),
        (n.deopt_handler, 8),
        (n.orig_pc_offset, 4),
    ];
    let end = fields
        .iter()
        .map(|&(off, width)| off + width)
        .max()
        .unwrap_or(0);
    let span = end.next_multiple_of(8);
    if span > u64::from(BLOB_SPAN_MAX) {
        return Err(format!(
            "the code blob fields the kernel reads span {span} bytes, more than its {BLOB_SPAN_MAX}"
        ));
    }
    // Checked by `Layout::check` (within 4 KiB) and the span above (within 512 bytes).
    let short = |v: u64| u16::try_from(v).expect("a bounded offset");
    let mut settings = HsProc {
        heap_count: heaps.len() as u32,
        segment_shift: *shift,
        heap_block_size: layout.heap.heap_block_size as u32,
        blob_span: span as u32,
        blob_name: short(b.name),
        blob_frame_size: short(b.frame_size),
        blob_frame_complete: short(b.frame_complete),
        blob_code_begin: short(b.code_begin),
        blob_code_end: short(b.code_end),
        nmethod_compile_id: short(n.compile_id),
        nmethod_deopt_handler: short(n.deopt_handler),
        nmethod_orig_pc_offset: short(n.orig_pc_offset),
        method_const_method: short(layout.method.const_method),
        const_method_size: short(layout.method.cm_size),
        interp_method_slot: INTERP_METHOD_SLOT,
        interp_bcp_slot: INTERP_BCP_SLOT,
        const_method_constants: short(layout.method.cm_constants),
        pool_holder: short(layout.pool.holder),
        klass_name: short(layout.pool.klass_name),
        ..HsProc::default()
    };
    settings.heaps[..heaps.len()].copy_from_slice(heaps);
    Ok(settings)
}
