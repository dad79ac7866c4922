//! What differs between processor architectures in userspace: one module per architecture, the one
//! this build targets chosen at build time. A new architecture is one more module with the same
//! items (the compiler names any it lacks).

// aarch64's rules are also built into the tests on other hosts, which check them against Debian's
// arm64 binaries.
#[cfg(any(target_arch = "aarch64", test))]
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
pub(crate) use aarch64::*;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86_64::*;

/// The relocation types of [`TLS_RELOCATIONS`].
pub(crate) struct TlsRelocations {
    pub(crate) descriptor: u32,
    pub(crate) module: u32,
    pub(crate) thread_offset: u32,
}

/// Bytes from the thread pointer to the thread's DTV pointer, per C library ([`DTV_AT`]).
pub(crate) struct DtvAt {
    pub(crate) glibc: i32,
    pub(crate) musl: i32,
}

/// The name of ELF machine `machine` (`e_machine`), for messages about binaries of another
/// architecture.
pub(crate) fn elf_machine_name(machine: u16) -> &'static str {
    use object::elf;
    match machine {
        elf::EM_X86_64 => "x86_64",
        elf::EM_386 => "i386",
        elf::EM_AARCH64 => "aarch64",
        elf::EM_ARM => "arm",
        elf::EM_RISCV => "riscv",
        elf::EM_PPC64 => "ppc64",
        elf::EM_PPC => "ppc",
        elf::EM_S390 => "s390",
        elf::EM_LOONGARCH => "loongarch",
        elf::EM_MIPS => "mips",
        _ => "unknown machine",
    }
}

/// The RELATIVE relocation type of ELF machine `machine` (what a position-independent binary's
/// loader adds its load address to), for the machines sonde builds for.
pub(crate) fn elf_relative_relocation(machine: u16) -> Option<u32> {
    use object::elf;
    match machine {
        elf::EM_X86_64 => Some(elf::R_X86_64_RELATIVE),
        elf::EM_AARCH64 => Some(elf::R_AARCH64_RELATIVE),
        _ => None,
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "sonde supports x86_64 and aarch64: add a module for this architecture in platform/arch/"
);
