//! CPython frames in user stacks: the per-process settings the kernel walks an interpreter's frame chain
//! with, and how a Python frame is stored among the native frames of a [`crate::UserStack`].
//!
//! A stored stack holds its native frames first (leaf to root), then its Python frames (leaf to root).
//! A Python frame is one word: [`PY_FRAME`], the code object's address, and the instruction offset in
//! that code (code units, 2 bytes each, or `f_lasti` as the interpreter keeps it before 3.10). The last
//! Python frame run by one call of the evaluation loop (`_PyEval_EvalFrameDefault`) carries
//! [`PY_ENTRY`], so userspace can give each native evaluation frame the Python frames it ran.

/// Marks a stored frame as a Python frame (never set in a native frame: user addresses are below 2^48
/// on x86_64 and AArch64, and `FRAME_EXACT` is bit 63).
pub const PY_FRAME: u64 = 1 << 62;
/// On a Python frame: the first frame its evaluation-loop call ran (the group ends here, walking from
/// the leaf).
pub const PY_ENTRY: u64 = 1 << 61;
/// Bits of the code object's address, stored shifted right by 3 (objects are 8-byte aligned): 48-bit
/// addresses, as arm64's `mmap` hands out right below 2^48 (x86_64's stay below 2^47).
const CODE_BITS: u32 = 45;
/// Largest instruction offset stored; larger ones are clamped (a function of 64 Ki instructions).
pub const PY_INSTR_MAX: u64 = (1 << 16) - 1;

/// Stores one Python frame.
#[inline(always)]
pub const fn pack_frame(code: u64, instr: u64, entry: bool) -> u64 {
    let instr = if instr > PY_INSTR_MAX {
        PY_INSTR_MAX
    } else {
        instr
    };
    let entry = if entry { PY_ENTRY } else { 0 };
    PY_FRAME | entry | instr << CODE_BITS | (code >> 3 & ((1 << CODE_BITS) - 1))
}

/// A stored Python frame, unpacked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PyFrame {
    /// Address of the code object in the process.
    pub code: u64,
    /// Instruction offset (see [`PyProc::layout`] for its unit).
    pub instr: u32,
    /// The first frame of its evaluation-loop call.
    pub entry: bool,
}

/// The Python frame stored in `word`, or None for a native frame.
pub const fn unpack_frame(word: u64) -> Option<PyFrame> {
    if word & PY_FRAME == 0 || word & crate::unwind::FRAME_EXACT != 0 {
        return None;
    }
    Some(PyFrame {
        code: (word & ((1 << CODE_BITS) - 1)) << 3,
        instr: ((word >> CODE_BITS) & PY_INSTR_MAX) as u32,
        entry: word & PY_ENTRY != 0,
    })
}

/// An offset that does not exist in this version.
pub const OFFSET_NONE: u16 = u16::MAX;

/// Largest [`PyProc::frame_span`]: every frame field the walk reads lies within it.
pub const FRAME_SPAN_MAX: u32 = 128;

/// Threads of one interpreter searched for the sampled thread's state before giving up.
pub const MAX_THREADS: u32 = 128;

/// Frame layouts ([`PyProc::layout`]).
pub mod layout {
    /// 3.9, 3.10: `PyFrameObject`, `f_back` chain, `f_lasti` an int (bytes in 3.9, code units in 3.10).
    /// Every frame is its own evaluation-loop call.
    pub const FRAME_OBJECT: u32 = 1;
    /// 3.11: `_PyInterpreterFrame`, `prev_instr` a pointer into the code, `is_entry` a byte.
    pub const INTERP_FRAME_IS_ENTRY: u32 = 2;
    /// 3.12+: `_PyInterpreterFrame`, `prev_instr`/`instr_ptr` a pointer, `owner` a byte; a frame
    /// owned by the C stack is the evaluation loop's entry shim, not Python code.
    pub const INTERP_FRAME_OWNER: u32 = 3;
}

/// `owner` of the evaluation loop's entry shim frame (`FRAME_OWNED_BY_CSTACK`, 3.12+).
pub const OWNED_BY_CSTACK: u8 = 3;

/// Who wrote a [`PyProc`] ([`PyProc::origin`]).
pub mod origin {
    /// Userspace, having captured the process.
    pub const CAPTURE: u16 = 0;
    /// The kernel, when the process mapped a binary userspace had found an interpreter in
    /// (`PY_FILES`): removed by the kernel at the process's exit, as userspace may never see it.
    pub const BINARY: u16 = 1;
}

/// Bytes of a code object's name string copied into its announcement: a `str` header (48 bytes before
/// 3.12, 40 after) and the first 56-64 ASCII characters, as most qualified names have.
pub const NAME_COPY: usize = 104;
/// Bytes of its file name string copied likewise: the header and 152-160 characters of path.
pub const FILE_COPY: usize = 200;

/// A [`crate::proc_event::PYTHON_CODE`] announcement as the ring holds it: the event, then the
/// code's name and file strings as the kernel copied them from the addresses in
/// [`crate::ProcEvent::data`] and [`crate::ProcEvent::extra`] (the `str` objects' first bytes, header
/// included; zeros where the copy faulted). A module's code is freed once it ran, and an unmarshalled
/// name string with it, or the process exits, before userspace reads them: the copies, taken while
/// the walk saw the code run, still name the frame.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CodeEvent {
    /// The announcement.
    pub event: crate::ProcEvent,
    /// The start of the name's `str` object.
    pub name: [u8; NAME_COPY],
    /// The start of the file name's `str` object.
    pub file: [u8; FILE_COPY],
}
const _: () = assert!(core::mem::size_of::<CodeEvent>() == 344);

/// One CPython process's settings, written by userspace when it finds the interpreter
/// (`PY_PROCS`, by tgid). Offsets are in bytes; [`OFFSET_NONE`] where the field does not exist.
///
/// The same settings by binary (`PY_FILES`, by the device and inode of the file exporting
/// `_PyRuntime`) hold `interp_head` and `gil_tstate` relative to where the file's executable mapping
/// puts its offset 0 (`start - offset`, as the kernel records a mapping): a process that maps the file
/// gets its own `PY_PROCS` entry from the kernel at once, before userspace has captured it.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct PyProc {
    /// Address of `_PyRuntime.interpreters.head` (the main interpreter's pointer).
    pub interp_head: u64,
    /// Address of the pointer to the thread state holding the GIL, used on-CPU only when thread
    /// states can be matched neither by native thread id nor by fs base; 0 otherwise.
    pub gil_tstate: u64,
    /// [`layout`].
    pub layout: u32,
    /// Bytes of a frame read at once, covering `frame_code`, `frame_previous`, `frame_instr` and
    /// `frame_entry` (at most [`FRAME_SPAN_MAX`]).
    pub frame_span: u32,
    /// `PyInterpreterState.threads.head` (`tstate_head` before 3.11).
    pub interp_threads_head: u16,
    /// `PyThreadState.next`.
    pub tstate_next: u16,
    /// `PyThreadState.native_thread_id` (the kernel's tid), or [`OFFSET_NONE`].
    pub tstate_native_tid: u16,
    /// `PyThreadState.frame` (≤ 3.10), `.cframe` (3.11, 3.12) or `.current_frame` (3.13+).
    pub tstate_frame: u16,
    /// `_PyCFrame.current_frame` when `tstate_frame` points to a `_PyCFrame`; [`OFFSET_NONE`] when
    /// it points to the frame itself.
    pub cframe_current: u16,
    /// The frame's code object (`f_code`, `f_executable`).
    pub frame_code: u16,
    /// The calling frame (`f_back`, `previous`).
    pub frame_previous: u16,
    /// The instruction: `f_lasti` (an int) or `prev_instr`/`instr_ptr` (a pointer).
    pub frame_instr: u16,
    /// `is_entry` or `owner` (a byte), or [`OFFSET_NONE`] for [`layout::FRAME_OBJECT`].
    pub frame_entry: u16,
    /// Where the bytecode starts in a code object (`co_code_adaptive`, 3.11+), or [`OFFSET_NONE`].
    pub code_bytecode: u16,
    /// `PyThreadState.thread_id` (`pthread_self()`, which glibc makes the thread's x86_64 fs base),
    /// matched against the task's fs base where there is no native thread id; or [`OFFSET_NONE`].
    pub tstate_pthread: u16,
    /// [`origin`].
    pub origin: u16,
    /// The code object's name (`co_qualname` from 3.11, `co_name` before).
    pub code_name: u16,
    /// The code object's file name (`co_filename`).
    pub code_filename: u16,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<PyProc>() == 56);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        // x86_64's mmap region, and arm64's right below 2^48.
        for code in [0x7f12_3456_7890, 0xffff_b9a4_4010] {
            let f = unpack_frame(pack_frame(code, 42, true)).unwrap();
            assert_eq!(
                f,
                PyFrame {
                    code,
                    instr: 42,
                    entry: true
                }
            );
        }
        let clamped = unpack_frame(pack_frame(0x1000, 1 << 20, false)).unwrap();
        assert_eq!(clamped.instr as u64, PY_INSTR_MAX);
        assert!(!clamped.entry);
        assert_eq!(unpack_frame(0x7fff_0000_1234), None);
        assert_eq!(unpack_frame(crate::unwind::FRAME_EXACT | 0x1234), None);
    }
}
