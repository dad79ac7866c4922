//! User-stack unwinding shared by both sides: unwind table rows built by the agent from `.eh_frame` /
//! `.debug_frame`, how the kernel finds them, the per-process mapping table, and stored user stacks.
//!
//! Lookup path in the kernel, per frame: the process's [`ProcMappings`] (one hash lookup per sample)
//! gives the mapping of the program counter, its table id and load bias; `table_pc = pc - bias`;
//! `UNWIND_PAGES[{table_id, table_pc >> PAGE_SHIFT}]` gives the block of `UNWIND_ROWS` and the row range
//! of that page; a binary search in the range gives the row in effect, and its rule index the
//! [`UnwindRule`] in `UNWIND_RULES`. The first row of every page entry starts at the page's first
//! address, so the search never falls off the front.
//!
//! Rows are stored packed, 4 bytes each ([`PackedRow`]): the address as an offset in its 4 KiB page and
//! the rule as an index into one array of distinct rules, shared by all tables (a binary has a few
//! hundred distinct rules for tens of thousands of rows).
//!
//! The rules are those of x86_64 (registers rsp, rbp, return address at CFA - 8). The row layout leaves
//! room for aarch64 (CFA from sp or x29, x29 at CFA + offset, the return address in x30 or at CFA +
//! offset) in new `kind` values; the agent refuses to load on other architectures for now.

use crate::{MAX_STACK_DEPTH, SHALLOW_STACK_DEPTH};

/// Rows per block of the `UNWIND_ROWS` store (one 32 KiB map value); a page's rows never straddle
/// blocks.
pub const ROWS_PER_BLOCK: usize = 8192;
/// Blocks per chunk of `UNWIND_ROWS` (1 MiB): the store is an array of arrays, and userspace creates a
/// chunk when its tables first need it, so kernel memory follows the tables loaded, not the budget.
pub const ROW_CHUNK_BLOCKS: u32 = 32;
/// log2 of the table addresses covered by one `UNWIND_PAGES` entry. 4 KiB pages hold at most 4096 rows
/// (one per byte), so a page always fits in one block, and a row's offset in its page in a `u16`.
pub const PAGE_SHIFT: u32 = 12;
/// Distinct rules `UNWIND_RULES` can hold (indices are `u16`).
pub const MAX_RULES: usize = 65536;
/// Executable mappings per process the kernel can tell apart; more are left to the frame-pointer step.
pub const MAX_EXEC_MAPPINGS: usize = 256;
/// [`ExecMapping::flags`]: the code has no unwind information and never will (anonymous or JIT code, a
/// binary without CFI), as opposed to a table not loaded yet.
pub const MAPPING_NO_UNWIND_INFO: u32 = 1;
/// [`ExecMapping::flags`]: every address of the mapping unwinds with the rule its table holds at the
/// one table address [`ExecMapping::bias`]: JIT code that runs on its interpreter loop's native frame
/// (PHP's), unwound as that loop is.
pub const MAPPING_AT_ADDRESS: u32 = 2;
/// [`ExecMapping::flags`]: every address of the mapping unwinds with the one rule at index
/// [`ExecMapping::bias`] of `UNWIND_RULES`, no table involved: JIT code whose frame has a fixed shape
/// no binary describes (YJIT 3.1's entry frame).
pub const MAPPING_RULE: u32 = 4;
/// Sampling programs' scratch slots in `UNWIND_SCRATCH` (per CPU): one for the on-CPU program, one for
/// the off-CPU program, so neither depends on the two never nesting on a CPU.
pub const SCRATCH_SLOTS: u32 = 2;

/// CFA rules: the low nibble of [`UnwindRow::kind`]. Named for x86_64's registers; on AArch64 `RSP`
/// is sp and `RBP` the frame pointer x29, and only `RSP`, `RBP`, `END`, `SIGNAL`, `NO_INFO` and
/// `UNSUPPORTED` are used.
pub mod cfa {
    /// CFA = rsp + `cfa_offset`.
    pub const RSP: u8 = 0;
    /// CFA = rbp + `cfa_offset`.
    pub const RBP: u8 = 1;
    /// binutils' lazy-binding PLT stubs (`DW_CFA_def_cfa_expression`): CFA = rsp + 8, plus 8 more once
    /// the stub's push has run, i.e. when `(rip & 15) >= threshold`. The threshold is in `cfa_offset`:
    /// 11 for the classic `.plt`, 10 for the MPX (`.plt.bnd`) layout, 9 for IBT stubs (`endbr64` first).
    pub const PLT: u8 = 2;
    /// The return address is undefined: this frame is a thread root (`_start`, `clone3`).
    pub const END: u8 = 3;
    /// Signal trampoline (`__restore_rt`, FDE augmentation `S`): the interrupted registers are in the
    /// `ucontext` at rsp; the next frame's address is the interrupted instruction itself.
    pub const SIGNAL: u8 = 4;
    /// No FDE covers the address (a gap between FDEs): step by frame pointer when allowed.
    pub const NO_INFO: u8 = 5;
    /// A rule the kernel cannot evaluate (another DWARF expression, a CFA in another register, an offset
    /// out of range): the walk ends here, counted.
    pub const UNSUPPORTED: u8 = 6;
    /// CFA = rbx + `cfa_offset`: glibc's lazy-binding trampolines (`_dl_runtime_resolve_*`, which
    /// align rsp for `xsave` after `mov %rsp, %rbx`). rbx is known in the leaf frame only (the
    /// sample's registers); elsewhere the walk ends as [`UNSUPPORTED`].
    pub const RBX: u8 = 7;
    /// CFA = rsp + `cfa_offset`, the return address in rdi: glibc's `vfork` pops it there so the
    /// child cannot clobber it on the shared stack. Known in the leaf frame only, as [`RBX`].
    pub const RA_IN_RDI: u8 = 8;
}

/// Frame-pointer rules: the high nibble of [`UnwindRow::kind`]. On x86_64 they say where the
/// caller's rbp is (the return address is always at CFA - 8). On AArch64 they say where both the
/// caller's x29 and the return address (x30, the link register) are: with `SAME` and `LOST` the
/// return address is still in x30 (a leaf before its prologue, or after its epilogue), known only
/// where the registers are the interrupted context's (the walk's first frame, or one a signal
/// interrupted).
pub mod rbp {
    /// rbp (x29) is the same in the caller.
    pub const SAME: u8 = 0x00;
    /// The caller's rbp is saved at CFA + `rbp_offset` * 8. AArch64: the frame record `{x29, x30}`
    /// is there (`stp x29, x30`), the return address in the word above x29.
    pub const AT_CFA: u8 = 0x10;
    /// The caller's rbp cannot be recovered (another rule): it is unknown from here on.
    pub const LOST: u8 = 0x20;
    /// AArch64: x29 is unchanged, the return address is saved at CFA + `rbp_offset` * 8 (a frame
    /// without a frame record, `-fomit-frame-pointer`).
    pub const RA_AT_CFA: u8 = 0x30;
    /// AArch64: x29 cannot be recovered, the return address is saved at CFA + `rbp_offset` * 8 (x29
    /// saved apart from x30, or by another rule).
    pub const LOST_RA_AT_CFA: u8 = 0x40;
    /// AArch64: the frame record `{x29, x30}` is at the bottom of the frame, CFA - `cfa_offset`
    /// (whether the CFA is sp or x29 based): a large frame, whose record lies past the slots
    /// `rbp_offset` can say.
    pub const RECORD_AT_BOTTOM: u8 = 0x50;
}

/// Flag on a stored frame address (never set in a user address): look the address up as it is.
pub const FRAME_EXACT: u64 = 1 << 63;
/// Marks a stored frame as file-relative (both top bits: native frames carry at most
/// [`FRAME_EXACT`], Python frames never carry it): `FRAME_FILE | [FILE_FRAME_EXACT] | file_id <<
/// FILE_ID_SHIFT | table_pc`. Such frames are found through the task's VMAs for a process userspace
/// had not captured (see [`FileTable`]); they name their binary without the process's mappings, so
/// frames of a process gone before userspace could read them still get names.
pub const FRAME_FILE: u64 = 3 << 62;
/// On a [`FRAME_FILE`] frame: what [`FRAME_EXACT`] says of a native one.
pub const FILE_FRAME_EXACT: u64 = 1 << 61;
/// Bit position of the file id in a [`FRAME_FILE`] frame; the ELF address is below it.
pub const FILE_ID_SHIFT: u32 = 40;
/// File ids that fit a [`FRAME_FILE`] frame (ids start at 1).
pub const MAX_FILE_IDS: u32 = 1 << (61 - FILE_ID_SHIFT);

/// A [`FRAME_FILE`] frame of `file_id` at ELF address `table_pc`, when both fit.
#[inline(always)]
pub const fn file_frame(file_id: u32, table_pc: u64, exact: bool) -> Option<u64> {
    if file_id == 0 || file_id >= MAX_FILE_IDS || table_pc >> FILE_ID_SHIFT != 0 {
        return None;
    }
    let exact = if exact { FILE_FRAME_EXACT } else { 0 };
    Some(FRAME_FILE | exact | (file_id as u64) << FILE_ID_SHIFT | table_pc)
}

/// `frame` marked as an exact instruction address, whichever its kind.
#[inline(always)]
pub const fn with_exact(frame: u64) -> u64 {
    if frame & FRAME_FILE == FRAME_FILE {
        frame | FILE_FRAME_EXACT
    } else {
        frame | FRAME_EXACT
    }
}

/// A [`FRAME_FILE`] frame, unpacked.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FileFrame {
    /// The binary's id (`FileTable::file_id`).
    pub file_id: u32,
    /// ELF virtual address in the binary.
    pub addr: u64,
    /// An exact instruction address rather than a return address.
    pub exact: bool,
}

/// The [`FileFrame`] stored in `frame`, or None for another kind of frame.
#[inline(always)]
pub const fn unpack_file_frame(frame: u64) -> Option<FileFrame> {
    if frame & FRAME_FILE != FRAME_FILE {
        return None;
    }
    Some(FileFrame {
        file_id: ((frame & !(FRAME_FILE | FILE_FRAME_EXACT)) >> FILE_ID_SHIFT) as u32,
        addr: frame & ((1 << FILE_ID_SHIFT) - 1),
        exact: frame & FILE_FRAME_EXACT != 0,
    })
}

/// `Unwind mode` load-time global values.
pub mod mode {
    /// Frame pointers only.
    pub const FP: u32 = 0;
    /// Unwind tables where they exist, frame pointers elsewhere.
    pub const AUTO: u32 = 1;
    /// Unwind tables only: a frame without one ends the walk.
    pub const TABLES: u32 = 2;
}

/// Outcome of a user-stack walk, stored with the stack (and mixed into its key).
pub mod outcome {
    /// Reached a thread root.
    pub const ROOT: u32 = 1;
    /// Cut at [`crate::MAX_STACK_DEPTH`].
    pub const DEPTH: u32 = 2;
    /// Cut by unreadable stack memory.
    pub const READ_FAULT: u32 = 3;
    /// Cut at code without an unwind table (`--unwind tables`).
    pub const NO_TABLE: u32 = 4;
    /// Cut at an unsupported unwind rule.
    pub const UNSUPPORTED: u32 = 5;
    /// A frame-pointer chain ended (rbp 0).
    pub const FP_END: u32 = 6;
    /// Cut at a frame that cannot be a caller.
    pub const BAD_FRAME: u32 = 7;
    /// The process is exiting and its address space is gone (`task->mm` cleared): there is no user
    /// stack left to walk beyond the leaf (not a truncation).
    pub const EXITING: u32 = 8;
    /// The process is inside `execve` between two images: its new address space holds no program
    /// yet (`mm->start_code` still 0) and the user registers point into the old one, which is gone.
    /// There is no user stack to walk (not a truncation).
    pub const EXECING: u32 = 9;

    /// Every way a walk ends; each walk ends in exactly one.
    pub const ALL: [u32; 9] = [
        ROOT,
        DEPTH,
        READ_FAULT,
        NO_TABLE,
        UNSUPPORTED,
        FP_END,
        BAD_FRAME,
        EXITING,
        EXECING,
    ];

    /// Whether a walk ending in `outcome` had no user stack to walk (the process exiting without
    /// its address space, or between two images): no truncation, and no part of the completeness
    /// figures.
    pub const fn has_no_stack(outcome: u32) -> bool {
        outcome == EXITING || outcome == EXECING
    }
}

/// How to find the caller of a frame: the part of a row that is not its address. 4 bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct UnwindRule {
    /// CFA offset in bytes from the register named by the CFA rule (`cfa::RSP`, `cfa::RBP`); the
    /// threshold for `cfa::PLT`.
    pub cfa_offset: u16,
    /// With `rbp::AT_CFA`: the caller's rbp is at CFA + `rbp_offset` * 8.
    pub rbp_offset: i8,
    /// CFA rule (low nibble, [`cfa`]) | rbp rule (high nibble, [`rbp`]).
    pub kind: u8,
}
const _: () = assert!(core::mem::size_of::<UnwindRule>() == 4);

impl UnwindRule {
    /// The CFA rule ([`cfa`]).
    pub const fn cfa_rule(&self) -> u8 {
        self.kind & 0x0f
    }
    /// The rbp rule ([`rbp`]).
    pub const fn rbp_rule(&self) -> u8 {
        self.kind & 0xf0
    }
}

/// One row of an unwind table as the agent builds it: from `pc` up to the next row's `pc`, how to
/// find the caller.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct UnwindRow {
    /// First address the row applies to, as an ELF virtual address of the binary.
    pub pc: u32,
    /// CFA offset in bytes from the register named by the CFA rule (`cfa::RSP`, `cfa::RBP`); the
    /// threshold for `cfa::PLT`.
    pub cfa_offset: u16,
    /// With `rbp::AT_CFA`: the caller's rbp is at CFA + `rbp_offset` * 8.
    pub rbp_offset: i8,
    /// CFA rule (low nibble, [`cfa`]) | rbp rule (high nibble, [`rbp`]).
    pub kind: u8,
}
const _: () = assert!(core::mem::size_of::<UnwindRow>() == 8);

impl UnwindRow {
    /// The CFA rule ([`cfa`]).
    pub const fn cfa_rule(&self) -> u8 {
        self.kind & 0x0f
    }
    /// The rbp rule ([`rbp`]).
    pub const fn rbp_rule(&self) -> u8 {
        self.kind & 0xf0
    }
    /// The rule, without the address.
    pub const fn rule(&self) -> UnwindRule {
        UnwindRule {
            cfa_offset: self.cfa_offset,
            rbp_offset: self.rbp_offset,
            kind: self.kind,
        }
    }
}

/// A row as the kernel stores it. 4 bytes.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct PackedRow {
    /// The row's first address as an offset in its page.
    pub pc_low: u16,
    /// Index of its rule in `UNWIND_RULES`.
    pub rule: u16,
}
const _: () = assert!(core::mem::size_of::<PackedRow>() == 4);

/// One value of the `UNWIND_ROWS` array: a block of rows, filled page by page.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct RowBlock {
    /// Rows; only the ranges named by page entries are meaningful.
    pub rows: [PackedRow; ROWS_PER_BLOCK],
}
const _: () = assert!(core::mem::size_of::<RowBlock>() == 32768);

/// Key of `UNWIND_PAGES`: one page of one table.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct PageKey {
    /// Table id (never reused while the agent runs; 0 means "no table").
    pub table_id: u32,
    /// `table_pc >> PAGE_SHIFT`.
    pub page: u32,
}
const _: () = assert!(core::mem::size_of::<PageKey>() == 8);

/// Value of `UNWIND_PAGES`: where a page's rows are.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct PageEntry {
    /// Index in `UNWIND_ROWS`.
    pub block: u32,
    /// First row of the page in the block.
    pub first: u16,
    /// Number of rows (at least 1; the first starts at the page's first address).
    pub count: u16,
}
const _: () = assert!(core::mem::size_of::<PageEntry>() == 8);

/// One executable mapping of a process as the kernel sees it.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct ExecMapping {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// `table_pc = pc - bias`; with [`MAPPING_AT_ADDRESS`], `table_pc = bias`; with
    /// [`MAPPING_RULE`], the rule's index.
    pub bias: u64,
    /// Table of the mapped binary, 0 when none is loaded (not built yet, evicted, or never: see `flags`).
    pub table_id: u32,
    /// [`MAPPING_NO_UNWIND_INFO`], [`MAPPING_AT_ADDRESS`], [`MAPPING_RULE`] or 0.
    pub flags: u32,
}
const _: () = assert!(core::mem::size_of::<ExecMapping>() == 32);

/// Key of `FILE_TABLES`: a mapped file as the kernel names it, `vma->vm_file->f_inode`'s
/// `i_sb->s_dev` (the kernel's `dev_t`, `major << 20 | minor`) and `i_ino`.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct FileKey {
    /// Device, kernel encoding.
    pub dev: u32,
    /// Reserved, 0.
    pub _pad: u32,
    /// Inode number.
    pub ino: u64,
}
const _: () = assert!(core::mem::size_of::<FileKey>() == 16);

/// Value of `FILE_TABLES`: the table of a binary file, for walks of processes userspace has not
/// captured. For a VMA mapping the file, `table_pc = pc - (vm_start - vm_pgoff * 4096 - delta)`.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct FileTable {
    /// Table id in `UNWIND_PAGES`.
    pub table_id: u32,
    /// The file's id in [`FRAME_FILE`] frames (assigned by userspace, never reused while it runs).
    pub file_id: u32,
    /// `p_vaddr - p_offset` of the binary's executable segment (wrapping).
    pub delta: u64,
}
const _: () = assert!(core::mem::size_of::<FileTable>() == 16);

/// Executable file mappings the kernel itself records per process ([`VmaMappings`]).
pub const MAX_VMA_MAPPINGS: usize = 16;

/// One executable file mapping, as the kernel recorded it from the VMA.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct VmaMapping {
    /// `vm_start`.
    pub start: u64,
    /// `vm_end` (exclusive).
    pub end: u64,
    /// `vm_start - vm_pgoff * 4096`: the address of the file's offset 0.
    pub file_base: u64,
    /// The file, as `FILE_TABLES` keys it.
    pub file: FileKey,
}
const _: () = assert!(core::mem::size_of::<VmaMapping>() == 40);

/// Value of `VMA_MAPPINGS`, keyed by tgid: the executable file mappings of a process that exec'd while
/// the agent ran, recorded by the kernel at `exec` (the program and its interpreter) and at each
/// `mmap` that maps a file executable (libraries). A process's first samples are walked with them and
/// `FILE_TABLES` before userspace has read its mappings, which for a process living milliseconds may be
/// never.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct VmaMappings {
    /// Valid entries in `mappings` (in the order mapped).
    pub count: u32,
    /// Reserved, 0.
    pub _pad: u32,
    /// The mappings.
    pub mappings: [VmaMapping; MAX_VMA_MAPPINGS],
}
const _: () = assert!(core::mem::size_of::<VmaMappings>() == 8 + 40 * MAX_VMA_MAPPINGS);

/// Byte offsets the kernel's recording of executable mappings reads: structure members from the running
/// kernel's BTF, tracepoint fields from tracefs (both differ per kernel build). `vm_file` 0 when
/// unknown: the recording is then off.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct VmaLayout {
    /// `vm_area_struct.vm_start`.
    pub vm_start: u32,
    /// `vm_area_struct.vm_end`.
    pub vm_end: u32,
    /// `vm_area_struct.vm_pgoff`.
    pub vm_pgoff: u32,
    /// `vm_area_struct.vm_file`.
    pub vm_file: u32,
    /// `file.f_inode`.
    pub f_inode: u32,
    /// `inode.i_ino`.
    pub i_ino: u32,
    /// `inode.i_sb`.
    pub i_sb: u32,
    /// `super_block.s_dev`.
    pub s_dev: u32,
    /// `vm_area_struct.vm_flags`.
    pub vm_flags: u32,
    /// `task_struct.mm`.
    pub task_mm: u32,
    /// `mm_struct.start_code`.
    pub mm_start_code: u32,
    /// `task_struct.group_leader`.
    pub task_group_leader: u32,
    /// `task_struct.start_time` (ns of `CLOCK_MONOTONIC` at fork, the clock of `bpf_ktime_get_ns`).
    pub task_start_time: u32,
    /// `child_pid` in the `sched:sched_process_fork` record.
    pub fork_child_pid: u32,
    /// `ret` in the `syscalls:sys_exit_mmap` record.
    pub mmap_ret: u32,
}

/// Value of `PROC_MAPPINGS`, keyed by tgid: the executable mappings of one process, sorted by start.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ProcMappings {
    /// Valid entries in `mappings`.
    pub count: u32,
    /// Reserved, 0.
    pub _pad: u32,
    /// Written by the kernel: when it last asked userspace to read the mappings again (rate limit).
    pub refresh_requested_ns: u64,
    /// Sorted by `start`, non-overlapping.
    pub mappings: [ExecMapping; MAX_EXEC_MAPPINGS],
}
const _: () = assert!(core::mem::size_of::<ProcMappings>() == 16 + 32 * MAX_EXEC_MAPPINGS);

/// Value of the user-stack maps: one walked stack, keyed by a 64-bit hash of its frames and outcome.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct UserStack {
    /// A second, independent hash of the frames: a key collision shows as a mismatch here.
    pub check: u64,
    /// Valid entries in `frames`.
    pub len: u32,
    /// How the walk ended ([`outcome`]).
    pub outcome: u32,
    /// Addresses, leaf first: the sampled instruction, then return addresses. Addresses to be looked
    /// up as they are (the leaf, a signal trampoline, the instruction a signal interrupted) carry
    /// [`FRAME_EXACT`]; the others point after a call, which is looked up at the address before.
    pub frames: [u64; MAX_STACK_DEPTH],
}
const _: () = assert!(core::mem::size_of::<UserStack>() == 16 + 8 * MAX_STACK_DEPTH);

/// Value of the user-stack maps (`names::USER_STACKS`): a [`UserStack`] of at most
/// [`SHALLOW_STACK_DEPTH`] frames, the same layout cut short (the kernel stores a prefix of its
/// walk's `UserStack`).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ShallowUserStack {
    pub check: u64,
    pub len: u32,
    pub outcome: u32,
    pub frames: [u64; SHALLOW_STACK_DEPTH],
}
const _: () = assert!(core::mem::size_of::<ShallowUserStack>() == 16 + 8 * SHALLOW_STACK_DEPTH);

/// Set on the id of a stack stored in the deep user-stack maps, clear on every other: which map
/// holds a stack is in its id.
pub const DEEP_STACK: u64 = 1 << 63;

/// The id under which a walk's stack of `len` frames and hash `hash` is stored.
#[inline(always)]
pub const fn stack_id(hash: u64, len: u32) -> u64 {
    if len as usize > SHALLOW_STACK_DEPTH {
        hash | DEEP_STACK
    } else {
        hash & !DEEP_STACK
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::{pack_frame, unpack_frame};

    #[test]
    fn a_stack_id_says_which_map_holds_the_stack() {
        let hash = DEEP_STACK | 0x1234;
        assert_eq!(stack_id(hash, SHALLOW_STACK_DEPTH as u32), 0x1234);
        assert_eq!(stack_id(0x1234, SHALLOW_STACK_DEPTH as u32 + 1), hash);
        assert_eq!(stack_id(0x1234, MAX_STACK_DEPTH as u32), hash);
    }

    #[test]
    fn file_frames_round_trip_and_stay_apart_from_other_kinds() {
        let f = file_frame(7, 0x4a_9123, false).unwrap();
        assert_eq!(
            unpack_file_frame(f),
            Some(FileFrame {
                file_id: 7,
                addr: 0x4a_9123,
                exact: false
            })
        );
        let exact = with_exact(f);
        assert!(unpack_file_frame(exact).unwrap().exact);
        assert_eq!(unpack_file_frame(exact).unwrap().addr, 0x4a_9123);
        assert_eq!(unpack_file_frame(exact).unwrap().file_id, 7);
        // Native frames, exact or not, and Python frames are not file frames, nor the reverse.
        let native = 0x7f12_3456_7890u64;
        assert_eq!(unpack_file_frame(native), None);
        assert_eq!(unpack_file_frame(with_exact(native)), None);
        assert_eq!(with_exact(native), native | FRAME_EXACT);
        let py = pack_frame(0x7f00_1234_5678, 99, true);
        assert_eq!(unpack_file_frame(py), None);
        assert_eq!(unpack_frame(f), None);
        assert_eq!(unpack_frame(exact), None);
        // Ids and addresses that do not fit are refused, never truncated.
        assert_eq!(file_frame(0, 0x1000, false), None);
        assert_eq!(file_frame(MAX_FILE_IDS, 0x1000, false), None);
        assert_eq!(file_frame(1, 1 << FILE_ID_SHIFT, false), None);
        let last = file_frame(MAX_FILE_IDS - 1, (1 << FILE_ID_SHIFT) - 1, true).unwrap();
        let back = unpack_file_frame(last).unwrap();
        assert_eq!(
            (back.file_id, back.addr),
            (MAX_FILE_IDS - 1, (1 << FILE_ID_SHIFT) - 1)
        );
    }
}
