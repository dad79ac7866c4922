//! V8 (Node.js) frames in user stacks: the per-process settings the kernel walks JavaScript frames
//! with, and what a V8 frame's words hold.
//!
//! V8's generated code (bytecode handlers and other embedded builtins, Sparkplug, Maglev and TurboFan
//! code) always keeps a frame pointer, and its frames hold, at fixed slots below rbp, either a frame
//! type marker (entry, exit, stub and builtin frames) or the `JSFunction` being run (and, for
//! interpreted frames, the bytecode offset). A pc in the embedded builtins or in code without an
//! unwind table is stepped that way (`unwind/v8.rs`), and the frame is stored as a runtime frame
//! ([`crate::runtime_frame`], two words) of one of the [`kind`]s below. Every offset comes from the
//! `v8dbg_*` constants `node` exports (read by userspace from the ELF file, `runtimes::v8`).
//!
//! V8's garbage collector moves objects: each frame carries a check userspace recomputes from the
//! object it reads at the same address, so an object moved or collected since the sample is counted
//! stale, never named after what lives there now.

use crate::runtime_frame::{self, RuntimeFrame};

/// What a V8 frame's head points to, and what its data word holds.
pub mod kind {
    use crate::runtime_frame::kind::{FIRST_V8, NATIVE_PC};

    /// A frame with a type marker (entry, exit, stub, builtin, construct and internal frames): the
    /// head holds the pc (named as native code where a file holds it: `Builtins_*`), the data the
    /// frame type (`v8dbg_frametype_*`) and no check.
    pub const MARKER: u64 = NATIVE_PC;
    /// An interpreted frame: the head holds the `SharedFunctionInfo`, the data the bytecode offset
    /// (as the frame holds it, from the `BytecodeArray`'s tagged address) and [`super::sfi_check`].
    pub const BYTECODE: u64 = FIRST_V8 + 1;
    /// Compiled code (Sparkplug, Maglev, TurboFan) holding the pc: the head holds the `Code` object,
    /// the data the pc's offset from its first instruction and [`super::code_check`].
    pub const CODE: u64 = FIRST_V8 + 2;
    /// A JavaScript frame whose position the kernel cannot tell: Sparkplug (baseline) code, or a pc
    /// in no code of its function it could read (a callee's prologue, code being replaced): the head
    /// holds the `SharedFunctionInfo`, the data no position and [`super::sfi_check`].
    pub const FUNCTION: u64 = FIRST_V8 + 3;
}

/// A V8 frame: a runtime frame of a V8 [`kind`].
pub type V8Frame = RuntimeFrame;

/// The check of a frame naming a `SharedFunctionInfo`: its `name_or_scope_info` and `script` words
/// (tagged pointers). Another object moved to the same address holds other words; the same function
/// whose name or script moved is counted stale rather than risk a wrong name.
#[inline(always)]
pub const fn sfi_check(name_or_scope_info: u64, script: u64) -> u32 {
    ((name_or_scope_info >> 3) ^ (script >> 3).rotate_left(16)) as u32
}

/// The check of a frame naming a `Code` object: where its instructions start and how many bytes
/// they are. Code replaced at that address starts or ends elsewhere.
#[inline(always)]
pub const fn code_check(instruction_start: u64, instruction_size: u32) -> u32 {
    (instruction_start as u32) ^ instruction_size.rotate_left(16)
}

/// Whether `kind` is one of V8's.
#[inline(always)]
pub const fn is_v8_kind(kind: u64) -> bool {
    kind >= runtime_frame::kind::FIRST_V8 && kind <= runtime_frame::kind::LAST
}

/// The V8 frame whose head is `head` and data `data`; None for any other words.
#[inline(always)]
pub const fn unpack_frame(head: u64, data: u64) -> Option<V8Frame> {
    match runtime_frame::unpack(head, data) {
        Some(frame) if is_v8_kind(frame.kind) => Some(frame),
        _ => None,
    }
}

/// Ranges of embedded builtins the kernel knows per process: the blob in `node`'s text, and the
/// copies V8 maps into each isolate's code range (`--short-builtin-calls`, on with 4 GiB or more).
pub const MAX_BUILTIN_RANGES: usize = 8;

/// Bytes of a heap object read at once (`JSFunction`, `SharedFunctionInfo`, `Code`): every field the
/// walk reads lies within them.
pub const OBJECT_SPAN: u32 = 64;

/// Bytes below rbp read at once: the frame slots (marker or context, function, argument count,
/// bytecode array and offset) lie within them.
pub const FRAME_SPAN: u32 = 48;

/// Longest distance from sp to rbp in a V8 frame (its spill slots and arguments lie between): beyond,
/// rbp is not this frame's.
pub const MAX_FRAME_SIZE: u64 = 64 << 10;

/// Largest frame type marker V8 uses (about 30 in V8 10 to 12).
pub const MAX_FRAME_TYPE: u64 = 63;

/// One address range (`start..end`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Range {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
}
const _: () = assert!(core::mem::size_of::<Range>() == 16);

/// One Node.js process's settings, written by userspace at capture from `node`'s `v8dbg_*`
/// constants and its mappings (`V8_PROCS`, by tgid). Offsets are in bytes; frame slots are bytes
/// below rbp (x86_64).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct V8Proc {
    /// The embedded builtins as mapped in the process; `builtin_count` are used.
    pub builtins: [Range; MAX_BUILTIN_RANGES],
    /// Used entries of `builtins`.
    pub builtin_count: u32,
    /// `CodeKind` field of `Code::flags`: mask (after the shift).
    pub code_kind_mask: u32,
    /// `Code::flags` shift to the code kind.
    pub code_kind_shift: u8,
    /// `CodeKind::BASELINE` (Sparkplug); interpreted and builtin code kinds are below it.
    pub code_kind_baseline: u8,
    /// 1 when a `Code` object's `instruction_start` is a pointer field (V8 11 and later), 0 when the
    /// instructions follow the object at that offset (V8 10).
    pub code_start_is_pointer: u8,
    /// Explicit padding.
    pub _pad0: u8,
    /// Frame slot of the context or the frame type marker (`v8dbg_off_fp_context_or_frame_type`).
    pub fp_marker: u16,
    /// Frame slot of the `JSFunction` (`v8dbg_off_fp_function`).
    pub fp_function: u16,
    /// Frame slot of an interpreted frame's bytecode offset (`v8dbg_off_fp_bytecode_offset`).
    pub fp_bytecode_offset: u16,
    /// `Map::instance_type` (a u16).
    pub map_instance_type: u16,
    /// Instance types of `JSFunction` and its subclasses (`first..=last`).
    pub type_js_function_first: u16,
    /// See `type_js_function_first`.
    pub type_js_function_last: u16,
    /// Instance type of `SharedFunctionInfo`.
    pub type_sfi: u16,
    /// Instance type of `Code`.
    pub type_code: u16,
    /// `JSFunction::shared`.
    pub js_function_shared: u16,
    /// `JSFunction::code`.
    pub js_function_code: u16,
    /// `SharedFunctionInfo::name_or_scope_info`.
    pub sfi_name_or_scope_info: u16,
    /// `SharedFunctionInfo::script` (`script_or_debug_info` before V8 12).
    pub sfi_script: u16,
    /// `Code::instruction_start`.
    pub code_instruction_start: u16,
    /// `Code::instruction_size` (an int).
    pub code_instruction_size: u16,
    /// `Code::flags` (a u32).
    pub code_flags: u16,
    /// Explicit padding.
    pub _pad1: u16,
}
const _: () = assert!(core::mem::size_of::<V8Proc>() == 176);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v8_frames_are_runtime_frames_of_v8_kinds() {
        let [head, data] = runtime_frame::pack(kind::CODE, 0x7f12_3456_7890, true, 0x1234, 77);
        let f = unpack_frame(head, data).unwrap();
        assert_eq!(
            (f.kind, f.address, f.exact, f.position, f.check),
            (kind::CODE, 0x7f12_3456_7890, true, 0x1234, 77)
        );
        let [java_head, java_data] =
            crate::hotspot::pack_frame(crate::hotspot::kind::COMPILED, 0x1000, false, 0, 0);
        assert!(unpack_frame(java_head, java_data).is_none());
        assert!(crate::hotspot::unpack_frame(head, data).is_none());
        assert_ne!(sfi_check(0x1001, 0x2001), sfi_check(0x1001, 0x3001));
        assert_ne!(code_check(0x7f00_0000, 100), code_check(0x7f00_0000, 101));
        for k in [kind::MARKER, kind::BYTECODE, kind::CODE, kind::FUNCTION] {
            assert!(is_v8_kind(k) && !crate::hotspot::is_java_kind(k));
        }
    }
}
