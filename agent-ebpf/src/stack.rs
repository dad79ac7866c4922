//! Stack capture shared by the on-CPU and off-CPU programs: the stored kernel stack, the walked and
//! stored user stack, and the thread name, as one aggregation key.

use aya_ebpf::{EbpfContext, helpers::bpf_get_current_comm};
use sonde_abi::{SLOTS, STACK_NONE, SampleKey, cost_path};

use crate::unwind::{self, regs::UserRegs};

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
pub fn capture<C: EbpfContext>(
    ctx: &C,
    tgid: u32,
    generation: u64,
    user: Option<UserRegs>,
    with_kernel: bool,
    scratch_slot: u32,
    on_cpu: bool,
) -> Captured {
    let slot = generation % SLOTS;
    let (kernel_stack_id, kernel_stack_status) = if with_kernel {
        unwind::store_kernel_stack(ctx.as_ptr(), generation, scratch_slot)
    } else {
        (0, STACK_NONE)
    };
    let (user_stack_id, user_stack_status, known_process, path) = match user {
        Some(regs) => {
            let stored = unwind::walk_and_store(tgid, regs, generation, scratch_slot, on_cpu);
            (stored.id, stored.status, stored.known_process, stored.path)
        }
        None => (0, STACK_NONE, false, cost_path::KERNEL),
    };
    Captured {
        key: SampleKey {
            tgid,
            kernel_stack_status,
            user_stack_id,
            user_stack_status,
            stack_slot: slot as u16,
            weight: 1,
            comm: bpf_get_current_comm().unwrap_or_default(),
            labels: crate::go_labels::current(tgid),
            kernel_stack_id,
        },
        known_process,
        path,
    }
}
