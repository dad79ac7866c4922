//! What differs between processor architectures in userspace: one module per architecture, the one
//! this build targets chosen at build time. A new architecture is one more module with the same
//! items (the compiler names any it lacks).

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
pub(crate) use aarch64::*;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86_64::*;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "sonde supports x86_64 and aarch64: add a module for this architecture in platform/arch/"
);
