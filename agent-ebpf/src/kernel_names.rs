//! Names kernel addresses with the kernel's own symbol lookup (`%ps`), for userspace, which runs the
//! program itself with a batch of addresses as its arguments (see `sonde_abi::kernel_names`). A
//! window's kernel frames cost a lookup each (a binary search of the kernel's symbol table and one
//! name decompressed) instead of a pass over `/proc/kallsyms`, where the kernel formats all of its
//! ~120,000 lines (~40 ms, a quarter of a short recording's CPU).

use aya_ebpf::{
    EbpfContext as _, bindings::BPF_RB_NO_WAKEUP, cty::c_char, helpers::generated::bpf_snprintf,
    programs::RawTracePointContext,
};
use sonde_abi::kernel_names::{BATCH, KernelName, NAME_MAX};

use crate::maps::KERNEL_NAMES;

/// `bpf_snprintf` takes its format from read-only global data only (a frozen map the verifier reads).
static FORMAT: [u8; 4] = *b"%ps\0";

/// Writes the name of every non-zero argument to `KERNEL_NAMES`. The ring holds more than a run's
/// records and userspace empties it after every run, so it is never full; were it, the run would stop
/// there and the addresses without a record stay unnamed (counted with the unnamed frames).
pub(crate) fn name_all(ctx: &RawTracePointContext) {
    // SAFETY: a raw tracepoint's context is its arguments, `BATCH` words when userspace runs it
    // (the kernel refuses a run with a shorter context than the program reads).
    let args = unsafe { *(ctx.as_ptr() as *const [u64; BATCH]) };
    for (index, address) in args.into_iter().enumerate() {
        if address == 0 {
            continue;
        }
        let Some(mut entry) = KERNEL_NAMES.reserve::<KernelName>(0) else {
            return;
        };
        let record = entry.as_mut_ptr();
        let mut data = [address];
        // SAFETY: `record` is the reserved entry, `NAME_MAX` bytes of name; the format is a NUL-ended
        // string in read-only data; `data` holds the one argument it takes.
        let written = unsafe {
            bpf_snprintf(
                (*record).name.as_mut_ptr().cast::<c_char>(),
                NAME_MAX as u32,
                FORMAT.as_ptr().cast::<c_char>(),
                data.as_mut_ptr(),
                8,
            )
        };
        // The count includes the NUL, and is what the whole name needed when it was cut.
        let len = (written.clamp(1, NAME_MAX as i64) - 1) as u32;
        // SAFETY: plain stores into the reserved entry.
        unsafe {
            (*record).index = index as u32;
            (*record).len = len;
        }
        // Userspace reads the ring right after the run: a wake-up (an interrupt queued per record)
        // would wake nobody.
        entry.submit(u64::from(BPF_RB_NO_WAKEUP));
    }
}
