//! Reads of the sampled process's memory, shared by every reader of it that is no frame step (labels,
//! thread-locals, the interpreters' walks).

use aya_ebpf::helpers::bpf_probe_read_user;

/// The word at `addr` in the current process; a fault is an error.
#[inline(always)]
pub fn user_u64(addr: u64) -> Result<u64, ()> {
    // SAFETY: a user address; a fault makes the helper fail, which is handled.
    unsafe { bpf_probe_read_user(addr as *const u64) }.map_err(|_| ())
}
