//! aarch64: what sonde's userspace knows of its registers and layouts. The kernel programs walk
//! AArch64 stacks by `.eh_frame` tables (`unwind_rules`) and frame pointers; the JVM's and V8's frame
//! layouts are x86_64's, and Go is walked by its frame pointers.

/// The architecture's name as `uname -m` and Rust give it.
pub(crate) const NAME: &str = "aarch64";

pub(crate) mod go_frames;
pub(crate) mod unwind_rules;

/// The vendor whose extensions the call frame information may use: AArch64's
/// `DW_CFA_AARCH64_negate_ra_state` (0x2d, SPARC's `DW_CFA_GNU_window_save` elsewhere) marks where
/// return addresses are signed with pointer authentication. Without the vendor, gimli refuses every
/// FDE of a binary built with `-mbranch-protection` (the kernel strips the signature instead).
pub(crate) const CFI_VENDOR: gimli::Vendor = gimli::Vendor::AArch64;

/// The ELF machine of the binaries whose unwind tables this build makes.
pub(crate) const ELF_MACHINE: u16 = object::elf::EM_AARCH64;

/// The page size executable mappings are aligned to: Debian's, Amazon Linux's and Ubuntu's arm64
/// kernels use 4 KiB pages (a 16 or 64 KiB kernel is not supported yet).
pub(crate) const PAGE_SIZE: u64 = 4096;

/// The rule of every instruction of the vDSO, which has no CFI on arm64 (Debian's 6.1 and 6.12
/// kernels): its functions are leaves that never move sp and keep the return address in x30
/// (`paciasp` ... `autiasp; ret`).
pub(crate) const VDSO_RULE: Option<sonde_abi::UnwindRow> = Some(sonde_abi::UnwindRow {
    pc: 0,
    cfa_offset: 0,
    rbp_offset: 0,
    kind: sonde_abi::unwind::cfa::RSP | sonde_abi::unwind::rbp::SAME,
});

/// The vDSO's signal trampoline, and how far before it its rule starts: a handler returns to its
/// first instruction, whose rule is looked up one byte before, at the `nop` the kernel puts there for
/// unwinders. Its frame continues from the interrupted registers (`cfa::SIGNAL`).
pub(crate) const VDSO_SIGRETURN: Option<(&str, u32)> = Some(("__kernel_rt_sigreturn", 4));

/// The TLS base (tpidr_el0) is not read from the task yet.
pub(crate) const THREAD_POINTER_IN_TASK: Option<&[&str]> = None;

/// PHP's JIT code sets up a frame of its own here (the OpenTelemetry eBPF profiler restarts its
/// unwinding there from the frame pointer): it keeps the frame-pointer step.
pub(crate) const PHP_JIT_ON_LOOP_FRAME: bool = false;

/// YJIT came to AArch64 in Ruby 3.2: 3.1 runs no JIT code here.
pub(crate) const YJIT_3_1_FRAME: Option<sonde_abi::UnwindRule> = None;

/// The syscall tracepoints' layout is not read on AArch64 yet.
pub(crate) const KERNEL_RECORDS_MAPPINGS: bool = false;

/// Go keeps `g` in a register (x28) on arm64, not in TLS: not read yet.
pub(crate) const GO_LABELS: bool = false;

/// The legacy kernel programs (Linux 5.10 to 6.0) find a switched-out task's user registers where
/// x86_64 keeps them only: arm64 needs the full programs (Linux 6.1+).
pub(crate) const LEGACY_PROGRAMS: bool = false;

/// The dynamic relocations that say where a module's thread-local storage went, as the thread
/// context reads them: a TLS descriptor, the module's DTV index, an offset from the thread pointer.
pub(crate) const TLS_RELOCATIONS: super::TlsRelocations = super::TlsRelocations {
    descriptor: object::elf::R_AARCH64_TLSDESC,
    module: object::elf::R_AARCH64_TLS_DTPMOD,
    thread_offset: object::elf::R_AARCH64_TLS_TPREL,
};

/// Static TLS sits just above the thread pointer (TLS variant I): a static TLS descriptor's argument
/// is a small positive offset.
pub(crate) const STATIC_TLS_BELOW_THREAD_POINTER: bool = false;

/// Bytes from the thread pointer to the thread's DTV pointer: glibc's `tcbhead_t.dtv` is the word
/// the thread pointer points at; musl keeps `pthread.dtv` as the last word before it.
pub(crate) const DTV_AT: super::DtvAt = super::DtvAt { glibc: 0, musl: -8 };
