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

use crate::MAX_STACK_DEPTH;

/// Rows per block of the `UNWIND_ROWS` store (one 32 KiB map value); a page's rows never straddle
/// blocks.
pub const ROWS_PER_BLOCK: usize = 8192;
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
/// Sampling programs' scratch slots in `UNWIND_SCRATCH` (per CPU): one for the on-CPU program, one for
/// the off-CPU program, so neither depends on the two never nesting on a CPU.
pub const SCRATCH_SLOTS: u32 = 2;

/// CFA rules: the low nibble of [`UnwindRow::kind`]. x86_64.
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
}

/// rbp rules: the high nibble of [`UnwindRow::kind`]. x86_64.
pub mod rbp {
    /// rbp is the same in the caller.
    pub const SAME: u8 = 0x00;
    /// The caller's rbp is saved at CFA + `rbp_offset` * 8.
    pub const AT_CFA: u8 = 0x10;
    /// The caller's rbp cannot be recovered (another rule): it is unknown from here on.
    pub const LOST: u8 = 0x20;
}

/// Flag on a stored frame address (never set in a user address): look the address up as it is.
pub const FRAME_EXACT: u64 = 1 << 63;

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
    /// `table_pc = pc - bias`.
    pub bias: u64,
    /// Table of the mapped binary, 0 when none is loaded (not built yet, evicted, or never: see `flags`).
    pub table_id: u32,
    /// [`MAPPING_NO_UNWIND_INFO`] or 0.
    pub flags: u32,
}
const _: () = assert!(core::mem::size_of::<ExecMapping>() == 32);

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
