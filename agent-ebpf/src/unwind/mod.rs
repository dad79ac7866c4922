//! User-stack walks: from the registers of the sampled (or switched-out) task, frame by frame with the
//! unwind tables the agent loaded (`.eh_frame` rows, see `sonde_abi::unwind`), falling back to the
//! frame-pointer step where no table covers the code, then stored in the slot's user-stack map under a
//! hash of the frames.
//!
//! Frames are walked in a `bpf_loop` (kernel 5.17+, a bounded loop before: `crate::repeat`): one
//! callback invocation per frame keeps the verifier's work independent of the depth, and 512 frames
//! fit in one program run.

mod announce;
mod files;
mod go_roots;
mod hotspot;
mod lookup;
mod php;
mod python;
mod ruby;
mod step;
mod steps;
mod table_step;
mod v8;
mod window;

use aya_ebpf::{macros::map, maps::PerCpuArray};
use sonde_abi::{
    FileTable, MAX_STACK_DEPTH, ProcMappings, SLOTS, STACK_COLLISION, STACK_MAP_FULL, STACK_OK,
    ShallowUserStack, UserStack, VmaMappings, cost_path,
    hotspot::HsProc,
    stat,
    unwind::{DEEP_STACK, FRAME_EXACT, MAX_VMA_MAPPINGS, SCRATCH_SLOTS, mode, outcome, stack_id},
    v8::V8Proc,
};

use crate::regs::UserRegs;
use crate::vmas::AddressSpace;
use crate::{
    globals,
    maps::{
        HS_PROCS, Once, PROC_MAPPINGS, V8_PROCS, VMA_MAPPINGS, add, bump, deep_user_stacks,
        insert_once, user_stacks,
    },
    runtime::walker,
    verifier::forget,
};

/// Per-CPU working memory of the user-stack walk (the BPF stack holds 512 bytes, a stack 4 KiB). Here,
/// beside its type, rather than in `maps.rs`: every other map is shared, this one is the walk's own.
#[map]
static UNWIND_SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(SCRATCH_SLOTS, 0);

/// Per-CPU working memory of one walk (a map value: the BPF stack is too small for a stack).
#[repr(C)]
pub struct Scratch {
    // Fields touched by every frame first, so they share cache lines: at 99 Hz, each sample finds its
    // memory cold, and each extra line or page costs a miss.
    /// Registers of the frame being unwound.
    regs: UserRegs,
    /// Non-zero when `regs.pc` is an exact instruction address (leaf, or after a signal frame).
    exact: u32,
    /// Non-zero when rbp could not be recovered for the current frame.
    bp_lost: u32,
    /// Index of the mapping of the previous frame (most frames are in the same binary).
    mapping_hint: u32,
    /// Non-zero once the frame-pointer chain has crossed to another stack (see `step::frame_pointer`).
    stack_switched: u32,
    /// Where values pass through to be forgotten by the verifier (`crate::verifier::forget`).
    opaque: u64,
    /// Running hashes of the frames: the map key, and an independent check of it.
    hash: u64,
    check: u64,
    /// The user stack, read a window at a time.
    window: window::Window,
    /// The stack being built; stored as is.
    stack: UserStack,
    /// Stacks this CPU stored or found in the current generation's map: the same stack again needs
    /// no map lookup (a cold hash lookup is the most expensive step of a short walk).
    stored: [StoredStack; STORED_SLOTS],
    /// Rules found by earlier walks on this CPU.
    rows: [lookup::CachedRow; lookup::ROW_CACHE_SLOTS],
    /// Walks through `VMA_MAPPINGS`: the table of each recorded mapping, once looked up (bit set in
    /// `vma_known`).
    vma_tables: [FileTable; MAX_VMA_MAPPINGS],
    vma_known: u32,
    /// The Python walk that follows the native one.
    py: python::PyWalk,
    /// The Ruby walk that follows the native one.
    rb: ruby::RbWalk,
    /// The PHP walk that follows the native one.
    php: php::PhpWalk,
    /// Java frames stepped among the native ones.
    java: hotspot::JavaWalk,
    /// JavaScript frames stepped among the native ones.
    v8: v8::V8Walk,
    /// Runtime objects this CPU announced to userspace lately (`announce`).
    announced: [announce::Announced; announce::ANNOUNCED_SLOTS],
}

// The kernel refuses per-CPU values over 32 KiB (`PCPU_MIN_UNIT_SIZE`): what the walk keeps here
// besides its stack must shrink when the stack grows.
const _: () = assert!(core::mem::size_of::<Scratch>() <= 32 * 1024);

/// Recently stored stacks remembered per CPU.
const STORED_SLOTS: usize = 64;

/// A stack known to be in the user-stack map of `generation`'s slot.
#[derive(Clone, Copy)]
struct StoredStack {
    id: u64,
    check: u64,
    generation: u64,
}

/// One iteration per frame, plus one to notice the depth limit.
const LOOPS: u32 = MAX_STACK_DEPTH as u32 + 1;

/// What the `bpf_loop` callbacks get: pointers to this walk's memory.
#[repr(C)]
struct Walk {
    scratch: *mut Scratch,
    procs: *mut ProcMappings,
    vmas: *const VmaMappings,
    /// The JVM's settings when the process runs one (and Java frames are walked), else null.
    hs: *const HsProc,
    /// V8's settings when the process runs Node.js (and JavaScript frames are walked), else null.
    v8: *const V8Proc,
    tgid: u32,
    /// The scratch entry's index in `UNWIND_SCRATCH`: how the legacy object's steps find it.
    #[cfg_attr(not(feature = "legacy"), allow(dead_code))]
    slot: u32,
}

/// A stored user stack: its key in the slot's user-stack map, or why there is none.
pub struct Stored {
    /// Key in `USTACKS_<slot>` (0 unless `status` is `STACK_OK`).
    pub id: u64,
    /// `STACK_OK`, `STACK_COLLISION` or a negative errno.
    pub status: i32,
    /// The process has mapping entries: userspace has captured it already.
    pub known_process: bool,
    /// The walk's `cost_path`.
    pub path: u32,
}

/// Walks the user stack of `tgid` from `regs` and stores it in the user-stack map of `generation`'s
/// slot. `scratch_slot` is the caller's own scratch entry (see `sonde_abi::unwind::SCRATCH_SLOTS`).
/// `on_cpu`: the thread was interrupted running (see `python::walk`).
#[inline(always)]
pub fn walk_and_store<const WALKER: u32>(
    tgid: u32,
    regs: UserRegs,
    generation: u64,
    scratch_slot: u32,
    on_cpu: bool,
) -> Stored {
    let Some(scratch) = UNWIND_SCRATCH.get_ptr_mut(scratch_slot) else {
        bump(stat::PROGRAM_ERRORS);
        return Stored {
            id: 0,
            status: sonde_abi::STACK_NONE,
            known_process: false,
            path: cost_path::FRAME_POINTERS,
        };
    };
    // SAFETY: the per-CPU scratch entry is this program's alone while it runs.
    let s = unsafe { &mut *scratch };
    s.stack.len = 0;
    s.stack.outcome = outcome::DEPTH;
    s.regs = regs;
    s.exact = 1;
    s.bp_lost = 0;
    s.mapping_hint = 0;
    s.stack_switched = 0;
    s.vma_known = 0;
    s.window.reset();
    s.java.reset(tgid);
    s.v8.reset(tgid);
    s.hash = 0x6a09_e667_f3bc_c908;
    s.check = 0xbb67_ae85_84ca_a73b;

    // Raw pointers, null for none, rather than `Option`s: with `--unwind fp` the compiler kept an
    // `Option`'s undefined payload in a register and spilled it, which the verifier refuses.
    let procs: *mut ProcMappings = if globals::unwind_mode() == mode::FP {
        core::ptr::null_mut()
    } else {
        PROC_MAPPINGS
            .get_ptr_mut(tgid)
            .unwrap_or(core::ptr::null_mut())
    };
    let known_process = !procs.is_null();
    // A JVM is captured (and its settings written) before its frames can be walked as Java; only
    // the Java program walks them (`runtime`), so the others hold no Java step.
    let hs: *const HsProc =
        if WALKER == walker::JAVA && known_process && globals::java_frames() != 0 {
            HS_PROCS.get_ptr(tgid).unwrap_or(core::ptr::null())
        } else {
            core::ptr::null()
        };
    // Likewise Node.js: one lookup per walk.
    let v8: *const V8Proc = if WALKER == walker::V8 && known_process && globals::v8_frames() != 0 {
        V8_PROCS.get_ptr(tgid).unwrap_or(core::ptr::null())
    } else {
        core::ptr::null()
    };
    let mut walk = Walk {
        scratch,
        procs: core::ptr::null_mut(),
        vmas: core::ptr::null(),
        hs,
        v8,
        tgid,
        slot: scratch_slot,
    };
    // A process sampled in `exit_group` after its address space was torn down has no stack left:
    // its leaf alone, said so rather than counted as a truncation. One inside `execve` between two
    // images has none either, and its leaf is an address of the old image: no frame at all.
    let space = crate::vmas::current_address_space();
    if space != AddressSpace::Loaded {
        s.stack.outcome = if space == AddressSpace::Gone {
            push(s); // the first frame: always room
            outcome::EXITING
        } else {
            outcome::EXECING
        };
        let mut stored = finish(s, generation);
        stored.known_process = known_process;
        stored.path = cost_path::FRAME_POINTERS;
        return stored;
    }
    // Not captured by userspace yet: the mappings the kernel recorded at exec and mmap, if any (the
    // legacy object records none, so it spares the lookup).
    let vmas = match known_process {
        false if globals::unwind_mode() != mode::FP && crate::vmas::RECORDS => {
            VMA_MAPPINGS.get_ptr(tgid)
        }
        _ => None,
    };
    let mut path = cost_path::TABLES;
    // `with_tables` gets a non-null `procs`, `with_vmas` a non-null `vmas`.
    match (known_process, vmas) {
        // One callback per runtime rather than one stepping every runtime: the verifier checks each
        // callback once, so each runtime adds its own steps, not their product with the others'.
        (true, _) => {
            walk.procs = procs;
            if !hs.is_null() {
                steps::walk(steps::Kind::Java, &mut walk);
            } else if !v8.is_null() {
                steps::walk(steps::Kind::V8, &mut walk);
            } else {
                steps::walk(steps::Kind::Native, &mut walk);
            }
        }
        (false, Some(vmas)) => {
            bump(stat::VMA_WALKS);
            walk.vmas = vmas;
            steps::walk(steps::Kind::Vmas, &mut walk);
            if s.stack.outcome == outcome::ROOT {
                bump(stat::VMA_WALK_ROOT);
            }
        }
        // `--unwind tables`: nothing to walk with until the process's tables are in.
        (false, None) if globals::unwind_mode() == mode::TABLES => {
            if push(s) {
                s.stack.outcome = outcome::NO_TABLE;
            }
        }
        (false, None) => {
            path = cost_path::FRAME_POINTERS;
            if globals::unwind_mode() == mode::AUTO {
                bump(stat::FALLBACK_NO_PROCESS);
            }
            steps::walk(steps::Kind::FramePointers, &mut walk);
        }
    }
    if !hs.is_null() {
        bump(stat::JAVA_WALKS);
        add(stat::JAVA_FRAMES, u64::from(s.java.frames));
        if s.java.frames > 0 {
            path = cost_path::JAVA;
        }
    }
    if !v8.is_null() {
        bump(stat::V8_WALKS);
        add(stat::V8_FRAMES, u64::from(s.v8.frames));
        if s.v8.frames > 0 {
            path = cost_path::V8;
        }
    }
    // A JVM or Node.js process runs no CPython, CRuby nor Go: their programs hold none of these
    // steps.
    if WALKER == walker::NATIVE {
        if globals::python() != 0 && python::walk(scratch, scratch_slot, tgid, on_cpu) > 0 {
            path = cost_path::PYTHON;
        }
        if globals::ruby() != 0 && ruby::walk(scratch, tgid) > 0 {
            path = cost_path::RUBY;
        }
        if globals::php() != 0 && php::walk(scratch, tgid) > 0 {
            path = cost_path::PHP;
        }
        go_roots::mark_root(s, tgid);
    }
    let mut stored = finish(s, generation);
    // Forgotten, as in `finish`: each is a constant on its own path here, and the sampling program
    // tests one and keys a map with the other, which kept apart every path that set them.
    stored.known_process = forget(&mut s.opaque, u64::from(known_process)) != 0;
    stored.path = forget(&mut s.opaque, u64::from(path)) as u32;
    stored
}

/// A global step's result as the walk's callbacks answer it (`verifier::loop_answer`).
#[inline(always)]
fn loop_flow(scratch: *mut Scratch, step: i64) -> i64 {
    // SAFETY: the walk's scratch, valid while the walk runs.
    crate::verifier::loop_answer(unsafe { &mut (*scratch).opaque }, step)
}

/// Appends the current pc to the stack; false (outcome DEPTH) when the stack is full.
#[inline(always)]
fn push(s: &mut Scratch) -> bool {
    let pc = s.regs.pc;
    push_word(s, if s.exact != 0 { pc | FRAME_EXACT } else { pc })
}

/// Appends a stored frame to the stack; false (outcome DEPTH) when the stack is full.
#[inline(always)]
fn push_word(s: &mut Scratch, word: u64) -> bool {
    // The exact flag is left out of the hashes, as it always was.
    if !store(s, word, word & !FRAME_EXACT) {
        s.stack.outcome = outcome::DEPTH;
        return false;
    }
    true
}

/// Appends `word`, mixing `key` into the stack's hashes; false when the stack is full. The
/// interpreters' walks (CPython, CRuby) append their frames after the native walk's outcome, which
/// a full stack leaves as it was: their walk counts itself as truncated.
#[inline(always)]
fn store(s: &mut Scratch, word: u64, key: u64) -> bool {
    let Some(slot) = s.stack.frames.get_mut(s.stack.len as usize) else {
        return false;
    };
    *slot = word;
    s.stack.len += 1;
    s.hash = mix(s.hash ^ key, 0x9e37_79b9_7f4a_7c15);
    s.check = mix(s.check ^ key, 0xc2b2_ae3d_27d4_eb4f);
    true
}

/// Sets `flag` on the last stored word (an interpreter's mark on the first frame of a loop call),
/// mixed into the hashes so stacks differing only in it stay apart.
#[inline(always)]
fn flag_last(s: &mut Scratch, flag: u64) {
    let last = (s.stack.len as usize).wrapping_sub(1);
    if let Some(word) = s.stack.frames.get_mut(last) {
        *word |= flag;
        mix_flag(s, flag);
    }
}

/// Clears `flag` from the last stored word, when `frames` (an interpreter's walk's count) says that
/// word is the walk's. A walk cut short (a fault, a full stack) ends this way on a frame left open,
/// so that userspace takes a closed last frame to mean the walk reached its thread's root
/// (`runtimes::merge` pairs loop calls from the root then).
#[inline(always)]
fn unflag_last(s: &mut Scratch, frames: u32, flag: u64) {
    if frames == 0 {
        return;
    }
    let last = (s.stack.len as usize).wrapping_sub(1);
    if let Some(word) = s.stack.frames.get_mut(last)
        && *word & flag != 0
    {
        *word &= !flag;
        mix_flag(s, flag);
    }
}

/// Mixes a change of `flag` on the last word into the stack's hashes, so stacks differing only in
/// it stay apart.
#[inline(always)]
fn mix_flag(s: &mut Scratch, flag: u64) {
    s.hash = mix(s.hash ^ flag, 0x9e37_79b9_7f4a_7c15);
    s.check = mix(s.check ^ flag, 0xc2b2_ae3d_27d4_eb4f);
}

/// One round of a multiply-xorshift hash.
#[inline(always)]
pub(crate) fn mix(x: u64, k: u64) -> u64 {
    let x = x.wrapping_mul(k);
    x ^ (x >> 29)
}

/// Counts the walk and stores the stack under its hash. The outcome is part of the key, so two walks
/// with the same frames but different endings stay apart.
#[inline(always)]
fn finish(s: &mut Scratch, generation: u64) -> Stored {
    // The outcome and the counters' indexes are forgotten: each is a constant on its own path here,
    // and a constant compared or used as a map key is precise, so the rest of the walk was verified
    // once per combination of paths reaching it (~14,000 of the native program's instructions).
    let why = forget(&mut s.opaque, u64::from(s.stack.outcome)) as u32;
    bump(forget(&mut s.opaque, u64::from(stat::walk_counter(why))) as u32);
    // By age, only stacks that exist: a process exiting or between two images has none to complete.
    if !outcome::has_no_stack(why) {
        let age = forget(
            &mut s.opaque,
            u64::from(crate::vmas::current_process_age_bucket()),
        ) as u32;
        bump(stat::AGE_WALKS + age);
        if why == outcome::ROOT {
            bump(stat::AGE_WALK_ROOT + age);
        }
    }
    add(stat::WALK_FRAMES, u64::from(s.stack.len));
    let tail = u64::from(why) << 32 | u64::from(s.stack.len);
    // Which map holds the stack is in its id (`sonde_abi::unwind::DEEP_STACK`).
    let id = stack_id(mix(s.hash ^ tail, 0xff51_afd7_ed55_8ccd), s.stack.len);
    let check = mix(s.check ^ tail, 0xc4ce_b9fe_1a85_ec53);
    s.stack.check = check;
    let ok = Stored {
        id,
        status: STACK_OK,
        known_process: false,
        path: cost_path::TABLES,
    };
    let Some(recent) = s.stored.get_mut(id as usize & (STORED_SLOTS - 1)) else {
        return ok;
    };
    if recent.id == id && recent.check == check && recent.generation == generation {
        return ok;
    }
    let failed = |counter: u32, status: i32| {
        bump(counter);
        Stored {
            id: 0,
            status,
            known_process: false,
            path: cost_path::TABLES,
        }
    };
    let slot = generation % SLOTS;
    // By reference: the values are 1 and 4 KiB, more than the BPF stack. A short stack is stored
    // as the prefix of the walk's, which has the same layout.
    // SAFETY (both): pointers from successful lookups; `ShallowUserStack` is a prefix of
    // `UserStack` (`#[repr(C)]`, the same header), and only its size is read from the scratch.
    let once = if id & DEEP_STACK != 0 {
        let check_of = |existing: *const UserStack| unsafe { (*existing).check };
        insert_once(deep_user_stacks(slot), &id, &s.stack, check, check_of)
    } else {
        let check_of = |existing: *const ShallowUserStack| unsafe { (*existing).check };
        let shallow = unsafe { &*(&raw const s.stack).cast::<ShallowUserStack>() };
        insert_once(user_stacks(slot), &id, shallow, check, check_of)
    };
    match once {
        Once::Stored => {}
        Once::Collision => return failed(stat::USER_STACK_COLLISION, STACK_COLLISION),
        Once::Full => return failed(stat::USER_STACK_ERROR, STACK_MAP_FULL),
    }
    *recent = StoredStack {
        id,
        check,
        generation,
    };
    ok
}
