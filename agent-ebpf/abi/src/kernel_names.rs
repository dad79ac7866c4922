//! Kernel function names from the kernel's own symbol lookup: userspace runs the
//! `sonde_kernel_names` program itself (`BPF_PROG_TEST_RUN`) with up to [`BATCH`] kernel addresses as
//! its arguments, and reads one [`KernelName`] per address from the `KERNEL_NAMES` ring buffer.

/// Addresses per run: a raw tracepoint program's arguments (the kernel's `MAX_BPF_FUNC_ARGS`); a
/// zero argument is no address.
pub const BATCH: usize = 12;

/// Bytes of a name as the kernel prints it with `%ps`: the symbol (at most the kernel's
/// `KSYM_NAME_LEN`, 512 since Linux 6.1), a space and the module in brackets when it has one, a NUL.
pub const NAME_MAX: usize = 512;

/// The program's name in the object.
pub const PROGRAM: &str = "sonde_kernel_names";

/// One address's name.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct KernelName {
    /// The address's argument index in the run, below [`BATCH`].
    pub index: u32,
    /// Bytes of `name` written, without the NUL (`NAME_MAX - 1` when cut).
    pub len: u32,
    /// `%ps` of the address: `function`, `function [module]`, or `0x...` when no symbol holds it.
    pub name: [u8; NAME_MAX],
}
