//! aarch64: what sonde's userspace knows of its registers and layouts. The kernel programs' AArch64
//! walk is frame pointers only for now: the `.eh_frame` rules and the runtimes' layouts are x86_64's.

/// The architecture's name as `uname -m` and Rust give it.
pub(crate) const NAME: &str = "aarch64";

pub(crate) mod go_frames;
pub(crate) mod unwind_rules;

/// The ELF machine of the binaries whose unwind tables this build makes.
pub(crate) const ELF_MACHINE: u16 = object::elf::EM_AARCH64;

/// The page size executable mappings are aligned to: Debian's, Amazon Linux's and Ubuntu's arm64
/// kernels use 4 KiB pages (a 16 or 64 KiB kernel is not supported yet).
pub(crate) const PAGE_SIZE: u64 = 4096;

/// No AArch64 table rules in the kernel programs yet: frame pointers only.
pub(crate) const TABLE_UNWINDING: bool = false;

/// The TLS base (tpidr_el0) is not read from the task yet.
pub(crate) const THREAD_POINTER_IN_TASK: Option<&[&str]> = None;

/// The syscall tracepoints' layout is not read on AArch64 yet.
pub(crate) const KERNEL_RECORDS_MAPPINGS: bool = false;

/// Go keeps `g` in a register (x28) on arm64, not in TLS: not read yet.
pub(crate) const GO_LABELS: bool = false;

/// The legacy kernel programs (Linux 5.10 to 6.0) find a switched-out task's user registers where
/// x86_64 keeps them only: arm64 needs the full programs (Linux 6.1+).
pub(crate) const LEGACY_PROGRAMS: bool = false;
