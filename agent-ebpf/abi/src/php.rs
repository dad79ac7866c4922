//! PHP frames in user stacks: the per-process settings the kernel walks a PHP executor's frames
//! with. Each frame is a [`crate::appended`] word tagged [`crate::appended::PHP`].
//!
//! PHP keeps its frames on its own VM stack, not the native one: the executor's globals
//! (`executor_globals`, one per process in the non-thread-safe builds distributions ship) point at
//! the running frame (`current_execute_data`), and each frame at its caller's
//! (`prev_execute_data`). The kernel walks that chain after the native walk, leaf to root, and
//! appends one word per frame running PHP code: its object the frame's `zend_function` (an op array,
//! which holds its name, class and file), its position the line of the frame's current opline. A
//! frame of a C function (`ZEND_INTERNAL_FUNCTION`) is among the native frames already and appends
//! nothing. The frame the executor was entered with (`ZEND_CALL_TOP` in its call info) carries
//! [`crate::appended::ENTRY`]: one native call of `execute_ex` ran every frame up to it.

/// Bytes of a frame (`zend_execute_data`) the kernel reads at once: every field it uses lies within
/// them.
pub const FRAME_READ: u32 = 56;
/// `ZEND_CALL_TOP`: in a frame's call info (`This.u1.type_info`), the frame the executor was
/// entered with (PHP 7.1 and later).
pub const CALL_TOP: u32 = 1 << 17;
/// `zend_function.type` of code compiled from PHP: a function or method (`ZEND_USER_FUNCTION`) and
/// code run by `eval` (`ZEND_EVAL_CODE`). Every other type is C.
pub const USER_FUNCTION: u8 = 2;
pub const EVAL_CODE: u8 = 4;

/// One PHP process's settings, written by userspace when it finds the executor (`PHP_PROCS`, by
/// tgid). Offsets are in bytes, for the process's PHP version.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct PhpProc {
    /// Address of `executor_globals.current_execute_data` in the process.
    pub current_execute_data: u64,
    /// `zend_execute_data.opline`, `.func`, `.This.u1.type_info` and `.prev_execute_data` (each
    /// below [`FRAME_READ`]).
    pub ex_opline: u16,
    pub ex_func: u16,
    pub ex_call_info: u16,
    pub ex_prev: u16,
    /// `zend_function.type`.
    pub func_type: u16,
    /// `zend_op.lineno`.
    pub op_lineno: u16,
    pub _pad: [u16; 2],
}
const _: () = assert!(core::mem::size_of::<PhpProc>() == 24);
