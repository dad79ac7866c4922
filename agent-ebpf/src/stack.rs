//! Stack capture shared by the on-CPU and off-CPU programs: user and kernel stack ids plus the thread name.

use aya_ebpf::{
    bindings::BPF_F_USER_STACK, helpers::bpf_get_current_comm, programs::tracing::StackIdContext,
};
use sonde_abi::{SLOTS, STACK_COLLISION, STACK_NONE, SampleKey, stat};

use crate::maps::{bump, stacks};

/// Builds the aggregation key of the current task, its stacks stored in the stack map of `generation`.
/// `in_user_mode`: the sample interrupted user code, so there is no kernel stack to walk (skipping the
/// walk saves most of the program's run time on CPU-bound processes).
#[inline(always)]
pub fn capture<C: StackIdContext>(
    ctx: &C,
    tgid: u32,
    generation: u64,
    in_user_mode: bool,
) -> SampleKey {
    let slot = generation % SLOTS;
    let map = stacks(slot);
    let user_stack_id = classify(
        ctx.get_stackid(map, BPF_F_USER_STACK as u64),
        stat::USER_STACK_COLLISION,
        stat::USER_STACK_ERROR,
    );
    let kernel_stack_id = if in_user_mode {
        STACK_NONE
    } else {
        classify(
            ctx.get_stackid(map, 0),
            stat::KERNEL_STACK_COLLISION,
            stat::KERNEL_STACK_ERROR,
        )
    };
    SampleKey {
        tgid,
        user_stack_id,
        kernel_stack_id,
        stack_slot: slot as u32,
        comm: bpf_get_current_comm().unwrap_or_default(),
    }
}

/// Turns a `bpf_get_stackid` result into a key field, counting every failure that loses a stack.
#[inline(always)]
fn classify(result: Result<i64, i32>, collision_stat: u32, error_stat: u32) -> i32 {
    match result {
        Ok(id) => id as i32,
        // Nothing to walk: a kernel thread has no user stack, a sample in user mode no kernel stack.
        Err(STACK_NONE) => STACK_NONE,
        Err(STACK_COLLISION) => {
            bump(collision_stat);
            STACK_COLLISION
        }
        Err(errno) => {
            bump(error_stat);
            errno
        }
    }
}
