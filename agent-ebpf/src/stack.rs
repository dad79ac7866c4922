//! Stack capture shared by the on-CPU and off-CPU programs: the kernel stack id, the walked and stored
//! user stack, and the thread name, as one aggregation key.

use aya_ebpf::{helpers::bpf_get_current_comm, programs::tracing::StackIdContext};
use sonde_abi::{SLOTS, STACK_COLLISION, STACK_NONE, SampleKey, cost_path, stat};

use crate::{
    maps::{bump, kernel_stacks},
    unwind::{self, regs::UserRegs},
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

/// Builds the aggregation key of the current task, its stacks stored in the slot of `generation`.
/// `user`: where the user stack starts (None: a kernel thread, nothing to walk). `with_kernel`: take
/// the kernel stack (skipped when the sample interrupted user code: there is none, and skipping the
/// walk saves most of the program's run time on CPU-bound processes). `on_cpu`: the task was
/// interrupted running, not switched out.
#[inline(always)]
pub fn capture<const WALKER: u32, C: StackIdContext>(
    ctx: &C,
    tgid: u32,
    generation: u64,
    user: Option<UserRegs>,
    with_kernel: bool,
    scratch_slot: u32,
    on_cpu: bool,
    labels: u64,
) -> Captured {
    let slot = generation % SLOTS;
    let kernel_stack_id = if with_kernel {
        classify(ctx.get_stackid(kernel_stacks(slot), 0))
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
        },
        known_process,
        path,
    }
}

/// Turns a kernel `bpf_get_stackid` result into a key field, counting every failure that loses a stack.
#[inline(always)]
fn classify(result: Result<i64, i32>) -> i32 {
    match result {
        Ok(id) => id as i32,
        Err(STACK_NONE) => STACK_NONE,
        Err(STACK_COLLISION) => {
            bump(stat::KERNEL_STACK_COLLISION);
            STACK_COLLISION
        }
        Err(errno) => {
            bump(stat::KERNEL_STACK_ERROR);
            errno
        }
    }
}
