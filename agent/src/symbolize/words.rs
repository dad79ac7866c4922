//! Where each word of a stored user stack is looked up: the kernel marks exact instruction
//! addresses; every other native word is a return address, looked up at the call. The words
//! themselves read as `crate::runtimes::stack_words` says.

use sonde_abi::unwind::FRAME_EXACT;

use crate::profile::Module;

/// Return addresses point after the call; look up the call itself so the caller's line is right.
pub(super) fn lookup_address(ip: u64, depth: usize) -> u64 {
    if depth == 0 { ip } else { ip.saturating_sub(1) }
}

/// As [`lookup_address`] for a user frame, which the kernel marks when it is an exact instruction
/// address (the leaf, a signal trampoline, the instruction a signal interrupted).
pub(super) fn user_lookup_address(ip: u64, depth: usize) -> u64 {
    if ip & FRAME_EXACT != 0 {
        ip & !FRAME_EXACT
    } else {
        lookup_address(ip, depth)
    }
}

/// As [`user_lookup_address`] for the file offset of a file-relative frame.
pub(super) fn file_lookup_offset(offset: u64, exact: bool, depth: usize) -> u64 {
    if exact {
        offset
    } else {
        lookup_address(offset, depth)
    }
}

/// The file offset of `addr` in the mapping `module`.
pub(super) fn file_offset(module: &Module, addr: u64) -> u64 {
    addr - module.start + module.file_offset
}
