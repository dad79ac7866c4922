//! HotSpot (OpenJDK) frames in user stacks: the per-process settings the kernel walks Java frames with,
//! and what a Java frame's words hold.
//!
//! Java frames are walked in place, interleaved with native ones: a frame whose pc lies in one of the
//! JVM's code heaps is stepped by HotSpot's own frame layout (the code blob's frame size, or the
//! interpreter's rbp frame) instead of an unwind table. Each Java frame is a runtime frame
//! ([`crate::runtime_frame`], two words) of one of the [`kind`]s below: the head holds the `Method*`
//! of an interpreted frame, or the `CodeBlob*` of compiled code, a native wrapper or a stub; the data
//! the bytecode index (interpreted) or the pc's offset from the blob's code start, and a check.

use crate::runtime_frame::{self, RuntimeFrame};

/// What a Java frame's head points to, and what its data word holds.
pub mod kind {
    use crate::runtime_frame::kind::FIRST_HOTSPOT;

    /// An interpreted frame: the head holds the `Method*`, the data its bytecode index and
    /// [`super::interpreted_check`] of its `ConstMethod*` and its class's name.
    pub const INTERPRETED: u64 = FIRST_HOTSPOT;
    /// JIT-compiled code (an `nmethod`): the head holds the blob, the data the pc's offset from the
    /// code start and the nmethod's compile id.
    pub const COMPILED: u64 = FIRST_HOTSPOT + 1;
    /// The wrapper of a native (JNI) method (a "native nmethod"), as [`COMPILED`].
    pub const NATIVE_WRAPPER: u64 = FIRST_HOTSPOT + 2;
    /// Any other code blob (call stub, adapters, runtime stubs, vtable stubs): the head holds the
    /// blob, the data the pc's offset and the first four bytes of the blob's name.
    pub const STUB: u64 = FIRST_HOTSPOT + 3;
    /// A frame of the interpreter whose `Method*` could not be read: the head holds the blob.
    pub const INTERPRETER_UNKNOWN: u64 = FIRST_HOTSPOT + 4;
}

/// A Java frame: a runtime frame of a HotSpot [`kind`].
pub type JavaFrame = RuntimeFrame;

/// The check of an interpreted frame: its `ConstMethod*` and the `Symbol*` of its class's name
/// (`Method` -> `ConstMethod` -> `ConstantPool` -> holder `Klass` -> `_name`). A class unloaded and
/// another loaded with the same layout can put a method and its `ConstMethod` at the very same
/// addresses (metaspace reuses freed chunks in order); the other class's name is another `Symbol`.
#[inline(always)]
pub const fn interpreted_check(const_method: u64, class_name: u64) -> u32 {
    ((const_method >> 3) ^ (class_name >> 3).rotate_left(16)) as u32
}

/// The two words of one Java frame.
#[inline(always)]
pub const fn pack_frame(
    kind: u64,
    address: u64,
    exact: bool,
    position: u64,
    check: u32,
) -> [u64; 2] {
    runtime_frame::pack(kind, address, exact, position, check)
}

/// Whether `kind` is one of HotSpot's.
#[inline(always)]
pub const fn is_java_kind(kind: u64) -> bool {
    // FIRST_HOTSPOT is 0: every kind below V8's first is HotSpot's.
    kind < runtime_frame::kind::FIRST_V8
}

/// The Java frame whose head is `head` and data `data`; None for any other words.
#[inline(always)]
pub const fn unpack_frame(head: u64, data: u64) -> Option<JavaFrame> {
    match runtime_frame::unpack(head, data) {
        Some(frame) if is_java_kind(frame.kind) => Some(frame),
        _ => None,
    }
}

/// Code heaps of one JVM the kernel knows (HotSpot has one, or three with a segmented code cache:
/// non-nmethods, profiled and non-profiled nmethods).
pub const MAX_CODE_HEAPS: usize = 4;

/// Largest [`HsProc::blob_span`]: every code blob field the walk reads lies within it.
pub const BLOB_SPAN_MAX: u32 = 512;

/// Steps of the segment map followed back to a blob's first segment before giving up (HotSpot's
/// segment map stores distances of at most 254 segments, and repeats them; the OpenTelemetry
/// profiler has seen at most 9 steps).
pub const SEGMAP_STEPS: u32 = 16;

/// Words searched above a compiled frame for a return address into the code cache (x86_64: compiled
/// code may push a few words beyond its declared frame size; async-profiler looks at up to 7).
pub const RA_SEARCH_SLOTS: usize = 6;

/// The first four bytes (little-endian) of the names of the code blobs the walk treats apart.
pub mod blob_name {
    /// "nmethod": JIT-compiled Java code.
    pub const NMETHOD: u32 = u32::from_le_bytes(*b"nmet");
    /// "native nmethod": the wrapper of a JNI method.
    pub const NATIVE_NMETHOD: u32 = u32::from_le_bytes(*b"nati");
    /// "Interpreter": the template interpreter.
    pub const INTERPRETER: u32 = u32::from_le_bytes(*b"Inte");
    /// "vtable chunks": megamorphic call stubs, which push nothing but the return address.
    pub const VTABLE_CHUNKS: u32 = u32::from_le_bytes(*b"vtab");
}

/// One code heap: its reserved range and its segment map.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct CodeHeap {
    /// `CodeHeap::_memory._low_boundary`: the first segment.
    pub low: u64,
    /// `CodeHeap::_memory._high_boundary`.
    pub high: u64,
    /// `CodeHeap::_segmap._low_boundary`: one byte per segment, the distance back to the segment
    /// holding the block's header (0 at the header, 0xff for a free segment).
    pub segmap: u64,
}
const _: () = assert!(core::mem::size_of::<CodeHeap>() == 24);

/// One JVM process's settings, written by userspace when it finds `libjvm.so` and has read its
/// `gHotSpotVMStructs` (`HS_PROCS`, by tgid). Offsets are in bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct HsProc {
    /// The code heaps; `heap_count` of them are used.
    pub heaps: [CodeHeap; MAX_CODE_HEAPS],
    /// Used entries of `heaps`.
    pub heap_count: u32,
    /// log2 of the segment size (`CodeHeap::_log2_segment_size`).
    pub segment_shift: u32,
    /// `sizeof(HeapBlock)`: a blob starts this far into its first segment.
    pub heap_block_size: u32,
    /// Bytes of a code blob read at once (at most [`BLOB_SPAN_MAX`]).
    pub blob_span: u32,
    /// `CodeBlob::_name` (a `const char*`).
    pub blob_name: u16,
    /// `CodeBlob::_frame_size` (an int, in words).
    pub blob_frame_size: u16,
    /// `CodeBlob::_frame_complete_offset` (an int).
    pub blob_frame_complete: u16,
    /// `CodeBlob::_code_begin` (an address).
    pub blob_code_begin: u16,
    /// `CodeBlob::_code_end` (an address).
    pub blob_code_end: u16,
    /// `nmethod::_compile_id` (an int).
    pub nmethod_compile_id: u16,
    /// `CompiledMethod::_deopt_handler_begin` (an address).
    pub nmethod_deopt_handler: u16,
    /// `nmethod::_orig_pc_offset` (an int): where a deoptimized frame keeps its original pc, from sp.
    pub nmethod_orig_pc_offset: u16,
    /// `Method::_constMethod`.
    pub method_const_method: u16,
    /// `sizeof(ConstMethod)`: the bytecodes follow it.
    pub const_method_size: u16,
    /// Words below rbp where an interpreter frame keeps its `Method*` (x86_64: 3).
    pub interp_method_slot: u16,
    /// Words below rbp where an interpreter frame keeps its bytecode pointer (x86_64: 8 from JDK 9,
    /// 7 before).
    pub interp_bcp_slot: u16,
    /// `ConstMethod::_constants` (a `ConstantPool*`).
    pub const_method_constants: u16,
    /// `ConstantPool::_pool_holder` (an `InstanceKlass*`).
    pub pool_holder: u16,
    /// `Klass::_name` (a `Symbol*`).
    pub klass_name: u16,
    /// Explicit padding.
    pub _pad: u16,
}
const _: () = assert!(core::mem::size_of::<HsProc>() == 144);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_frames_are_runtime_frames_of_hotspot_kinds() {
        let [head, data] = pack_frame(kind::COMPILED, 0x7f12_3456_7890, true, 0x1234, 77);
        let f = unpack_frame(head, data).unwrap();
        assert_eq!(
            (f.kind, f.address, f.exact, f.position, f.check),
            (kind::COMPILED, 0x7f12_3456_7890, true, 0x1234, 77)
        );
        let [v8_head, v8_data] =
            runtime_frame::pack(runtime_frame::kind::FIRST_V8, 0x1000, false, 0, 0);
        assert!(unpack_frame(v8_head, v8_data).is_none());
        assert_ne!(
            interpreted_check(0x1000, 0x2000),
            interpreted_check(0x1000, 0x3000)
        );
    }
}
