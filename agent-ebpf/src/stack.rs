//! Stack capture shared by the on-CPU and off-CPU programs: the kernel stack id, the walked and stored
//! user stack, and the thread name, as one aggregation key.

use core::ffi::c_void;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_comm, generated::bpf_get_stack},
};
use sonde_abi::{
    KERNEL_STACK_DEPTH, KernelStack, SLOTS, STACK_COLLISION, STACK_MAP_FULL, STACK_NONE, SampleKey,
    cost_path, stat,
};

use crate::{
    maps::{KSTACK_SCRATCH, Once, bump, insert_once, kernel_stacks},
    regs::UserRegs,
    unwind::{self, mix},
};

/// A sample's aggregation key, and whether userspace knows the process already.
pub struct Captured {
    /// The key.
    pub key: SampleKey,
    /// The process has unwind mapping entries, so it was captured: no need to announce it.
    pub known_process: bool,
    /// What the walk's run time is charged to (`sonde_abi::cost_path`).
    pub path: u32,
}

/// Builds the aggregation key of the current task (thread `tid` of process `tgid`), its stacks stored
/// in the slot of `generation`.
/// `user`: where the user stack starts (None: a kernel thread, nothing to walk). `with_kernel`: take
/// the kernel stack (skipped when the sample interrupted user code: there is none, and skipping the
/// walk saves most of the program's run time on CPU-bound processes). `on_cpu`: the task was
/// interrupted running, not switched out.
#[inline(always)]
pub fn capture<const WALKER: u32, C: EbpfContext>(
    ctx: &C,
    tgid: u32,
    tid: u32,
    generation: u64,
    user: Option<UserRegs>,
    with_kernel: bool,
    scratch_slot: u32,
    on_cpu: bool,
    labels: u64,
) -> Captured {
    let slot = generation % SLOTS;
    let kernel_stack_id = if with_kernel {
        kernel_stack(ctx, slot, scratch_slot)
    } else {
        STACK_NONE
    };
    let (user_stack_id, user_stack_status, known_process, path) = match user {
        Some(regs) => {
            let stored =
                unwind::walk_and_store::<WALKER>(tgid, regs, generation, scratch_slot, on_cpu);
            (stored.id, stored.status, stored.known_process, stored.path)
        }
        None => (0, STACK_NONE, false, cost_path::KERNEL),
    };
    Captured {
        key: SampleKey {
            tgid,
            kernel_stack_id,
            user_stack_id,
            user_stack_status,
            stack_slot: slot as u16,
            weight: 1,
            comm: bpf_get_current_comm().unwrap_or_default(),
            labels,
            tid,
            _reserved: 0,
        },
        known_process,
        path,
    }
}

/// Reads the current kernel stack and stores it in the kernel-stack map of `slot` under a 31-bit hash
/// of its frames; the key, or why there is none (counted when a stack is lost).
#[inline(always)]
fn kernel_stack<C: EbpfContext>(ctx: &C, slot: u64, scratch_slot: u32) -> i32 {
    let Some(buf) = KSTACK_SCRATCH.get_ptr_mut(scratch_slot) else {
        bump(stat::KERNEL_STACK_ERROR);
        return STACK_MAP_FULL;
    };
    // SAFETY: this CPU's entry for this program kind; nothing else runs on it meanwhile.
    let buf = unsafe { &mut *buf };
    // SAFETY: the helper writes at most the size given, into map memory.
    let read = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            buf.ips.as_mut_ptr().cast(),
            (8 * KERNEL_STACK_DEPTH) as u32,
            0,
        )
    };
    if read <= 0 {
        // -EFAULT: no kernel stack to walk (the helper returns it for an empty one too).
        if read == 0 || read == i64::from(STACK_NONE) {
            return STACK_NONE;
        }
        bump(stat::KERNEL_STACK_ERROR);
        return read as i32;
    }
    // The frames read, one `bpf_loop` callback each: an unrolled loop over all 127 words (the zeroed
    // tail included) cost ~2,000 instructions a run and as many verified on every path here.
    let frames = (read as u64 / 8).min(KERNEL_STACK_DEPTH as u64);
    let mut hashing = Hashing {
        ips: buf.ips.as_ptr(),
        hash: 0x6a09_e667_f3bc_c908,
        check: 0xbb67_ae85_84ca_a73b,
    };
    crate::repeat::repeat(frames as u32, hash_frame, (&raw mut hashing).cast());
    // The length too: the tail past it is zero, so equal frames mean equal buffers.
    let check = mix(hashing.check ^ frames, 0xc4ce_b9fe_1a85_ec53);
    buf.check = check;
    // Non-negative: the key field's negative values are statuses.
    let id = (mix(hashing.hash ^ frames, 0xff51_afd7_ed55_8ccd) >> 33) as u32;
    // SAFETY: a pointer from a successful lookup.
    let check_of = |existing: *const KernelStack| unsafe { (*existing).check };
    match insert_once(kernel_stacks(slot), &id, buf, check, check_of) {
        Once::Stored => id as i32,
        Once::Collision => {
            bump(stat::KERNEL_STACK_COLLISION);
            STACK_COLLISION
        }
        Once::Full => {
            bump(stat::KERNEL_STACK_ERROR);
            STACK_MAP_FULL
        }
    }
}

/// What `hash_frame` gets: the frames being hashed and the running hashes.
#[repr(C)]
struct Hashing {
    ips: *const u64,
    hash: u64,
    check: u64,
}

/// `bpf_loop` callback: mixes kernel frame `index` into both hashes.
#[inline(never)]
extern "C" fn hash_frame(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `Hashing` that `kernel_stack` passed, `ips` its scratch entry's frames.
    let h = unsafe { &mut *ctx.cast::<Hashing>() };
    if index >= KERNEL_STACK_DEPTH as u64 {
        return 1;
    }
    // SAFETY: `index` is within the frames array, checked above.
    let ip = unsafe { *h.ips.add(index as usize) };
    h.hash = mix(h.hash ^ ip, 0x9e37_79b9_7f4a_7c15);
    h.check = mix(h.check ^ ip, 0xc2b2_ae3d_27d4_eb4f);
    0
}
