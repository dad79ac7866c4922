//! x86_64: what sonde's userspace knows of its registers and layouts.

/// The architecture's name as `uname -m` and Rust give it.
pub(crate) const NAME: &str = "x86_64";

pub(crate) mod go_frames;
pub(crate) mod unwind_rules;

/// The vendor whose extensions the call frame information may use: none on x86_64.
pub(crate) const CFI_VENDOR: gimli::Vendor = gimli::Vendor::Default;

/// The ELF machine of the binaries whose unwind tables this build makes.
pub(crate) const ELF_MACHINE: u16 = object::elf::EM_X86_64;

/// The page size executable mappings are aligned to (the kernel maps a segment from its
/// page-aligned file offset).
pub(crate) const PAGE_SIZE: u64 = 4096;

/// The vDSO's own CFI says how to unwind it.
pub(crate) const VDSO_RULE: Option<sonde_abi::UnwindRow> = None;

/// The vDSO's own CFI marks its signal trampoline.
pub(crate) const VDSO_SIGRETURN: Option<(&str, u32)> = None;

/// Where a thread's TLS base is in the kernel's task: the saved fs base (`thread.fsbase`), which
/// CPython 3.9/3.10 thread states hold as `pthread_self()`, and Go's `g` is found from.
pub(crate) const THREAD_POINTER_IN_TASK: Option<&[&str]> =
    Some(&["task_struct", "thread", "fsbase"]);

/// PHP's JIT code runs on the native frame of the executor's loop (`execute_ex` jumps to it and it
/// keeps the loop's stack frame), so it unwinds with the loop's rule (`runtimes::php::jit`).
pub(crate) const PHP_JIT_ON_LOOP_FRAME: bool = true;

/// YJIT 3.1's code runs in the frame its entry sets up (`yjit_entry_prologue`: three pushes, of the
/// registers it keeps the control frame, execution context and VM stack pointer in, and no frame
/// pointer) and calls C with that frame unchanged: CFA = rsp + 32, the return address below it, rbp
/// the caller's (`runtimes::ruby::jit`).
pub(crate) const YJIT_3_1_FRAME: Option<sonde_abi::UnwindRule> = Some(sonde_abi::UnwindRule {
    cfa_offset: 32,
    rbp_offset: 0,
    kind: sonde_abi::unwind::cfa::RSP | sonde_abi::unwind::rbp::SAME,
});

/// The kernel programs record new processes' executable mappings from x86_64's syscall tracepoints.
pub(crate) const KERNEL_RECORDS_MAPPINGS: bool = true;

/// Go keeps `g` in TLS at a negative offset from the fs base, read by the goroutine-label walker.
pub(crate) const GO_LABELS: bool = true;

/// The legacy kernel programs (Linux 5.10 to 6.0) are built for x86_64 and tested there (the VM
/// test boots Debian 11's 5.10).
pub(crate) const LEGACY_PROGRAMS: bool = true;

/// The dynamic relocations that say where a module's thread-local storage went, as the thread
/// context reads them: a TLS descriptor, the module's DTV index, an offset from the thread pointer.
pub(crate) const TLS_RELOCATIONS: super::TlsRelocations = super::TlsRelocations {
    descriptor: object::elf::R_X86_64_TLSDESC,
    module: object::elf::R_X86_64_DTPMOD64,
    thread_offset: object::elf::R_X86_64_TPOFF64,
};

/// Static TLS sits below the thread pointer (TLS variant II): a static TLS descriptor's argument is
/// a negative offset.
pub(crate) const STATIC_TLS_BELOW_THREAD_POINTER: bool = true;

/// Bytes from the thread pointer to the thread's DTV pointer: glibc's `tcbhead_t.dtv`, musl's
/// `pthread.dtv`, both the second word.
pub(crate) const DTV_AT: super::DtvAt = super::DtvAt { glibc: 8, musl: 8 };
