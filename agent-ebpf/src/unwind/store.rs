//! Storing a stack in the stack map of its slot, under a hash of its frames: the walked user stacks
//! and the kernel stacks, in one map of one value type, so one drain reads both. A per-CPU memory of
//! recently stored stacks saves the map lookup of a stack seen again.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::generated::{bpf_get_stack, bpf_loop},
};
use sonde_abi::{
    MAX_STACK_DEPTH, SLOTS, STACK_COLLISION, STACK_MAP_FULL, STACK_OK, UserStack, cost_path, stat,
    unwind::outcome,
};

use super::{STORED_SLOTS, Scratch, Stored, StoredStack, UNWIND_SCRATCH, mix, step};
use crate::maps::{bump, user_stacks};

/// Takes the kernel stack of the event in `ctx` into this CPU's scratch and stores it in the stack map
/// of `generation`'s slot, beside the user stacks (one store, one drain for both): its key and
/// `STACK_OK`, or no key and why. Called before the user walk, which reuses the scratch.
#[inline(always)]
pub fn store_kernel_stack(ctx: *mut c_void, generation: u64, scratch_slot: u32) -> (u64, i32) {
    let Some(scratch) = UNWIND_SCRATCH.get_ptr_mut(scratch_slot) else {
        bump(stat::PROGRAM_ERRORS);
        return (0, sonde_abi::STACK_NONE);
    };
    // SAFETY: the per-CPU scratch entry is this program's alone while it runs.
    let s = unsafe { &mut *scratch };
    let size = core::mem::size_of_val(&s.stack.frames) as u32;
    // SAFETY: the buffer is the scratch's frame array, `size` bytes long; flags 0 is the kernel stack.
    let written = unsafe { bpf_get_stack(ctx, s.stack.frames.as_mut_ptr().cast(), size, 0) };
    if written < 0 {
        bump(stat::KERNEL_STACK_ERROR);
        return (0, written as i32);
    }
    let len = (written as u64 / 8).min(MAX_STACK_DEPTH as u64) as u32;
    if len == 0 {
        return (0, sonde_abi::STACK_NONE);
    }
    s.stack.len = len;
    s.stack.outcome = outcome::KERNEL;
    // Other seeds than a user walk's: the two kinds of stack share the map.
    s.hash = 0x510e_527f_ade6_82d1;
    s.check = 0x9b05_688c_2b3e_6c1f;
    // bpf_loop's context must live on the stack: a pointer to the scratch pointer.
    let mut ctx = scratch;
    // SAFETY: the callback matches bpf_loop's contract and uses the scratch only while it runs.
    unsafe {
        bpf_loop(
            len,
            hash_kernel_frame as *mut c_void,
            (&raw mut ctx).cast(),
            0,
        )
    };
    let stored = store(s, generation, Stack::Kernel);
    (stored.id, stored.status)
}

/// `bpf_loop` callback: mixes kernel frame `index` of the scratch's stack into its hashes.
#[inline(never)]
extern "C" fn hash_kernel_frame(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` points at the scratch pointer passed by `store_kernel_stack`.
    let s = unsafe { &mut **ctx.cast::<*mut Scratch>() };
    let Some(&frame) = s
        .stack
        .frames
        .get(index as usize & step::FRAME_INDEX_MASK as usize)
    else {
        return 1;
    };
    s.hash = mix(s.hash ^ frame, 0x9e37_79b9_7f4a_7c15);
    s.check = mix(s.check ^ frame, 0xc2b2_ae3d_27d4_eb4f);
    0
}

/// Which stack `store` keeps, for its counters.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stack {
    User,
    Kernel,
}

/// Stores `s.stack` in the stack map of `generation`'s slot under its hashes (`s.hash`, `s.check`,
/// with its outcome and length mixed in).
#[inline(always)]
pub(super) fn store(s: &mut Scratch, generation: u64, stack: Stack) -> Stored {
    let (collision, error) = match stack {
        Stack::User => (stat::USER_STACK_COLLISION, stat::USER_STACK_ERROR),
        Stack::Kernel => (stat::KERNEL_STACK_COLLISION, stat::KERNEL_STACK_ERROR),
    };
    let tail = u64::from(s.stack.outcome) << 32 | u64::from(s.stack.len);
    let id = mix(s.hash ^ tail, 0xff51_afd7_ed55_8ccd);
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
    let map = user_stacks(generation % SLOTS);
    let same = |existing: *const UserStack| {
        // SAFETY: a pointer from a successful lookup.
        if unsafe { (*existing).check } == check {
            true
        } else {
            bump(collision);
            false
        }
    };
    // By reference: the value is 1 KiB, twice the BPF stack.
    #[allow(clippy::needless_borrows_for_generic_args)]
    let inserted = |stack: &UserStack| map.insert(id, stack, BPF_NOEXIST as u64);
    let stored = match map.get_ptr(id) {
        Some(existing) => same(existing),
        None => match inserted(&s.stack) {
            Ok(()) => true,
            // Stored meanwhile by another CPU: the same stack, or a collision.
            Err(_) => match map.get_ptr(id) {
                Some(existing) => same(existing),
                None => {
                    bump(error);
                    return Stored {
                        id: 0,
                        status: STACK_MAP_FULL,
                        known_process: false,
                        path: cost_path::TABLES,
                    };
                }
            },
        },
    };
    if !stored {
        return Stored {
            id: 0,
            status: STACK_COLLISION,
            known_process: false,
            path: cost_path::TABLES,
        };
    }
    *recent = StoredStack {
        id,
        check,
        generation,
    };
    ok
}
