//! HotSpot (OpenJDK 11 to 22, x86_64) processes: finding the JVM in a captured process and reading its
//! own description of its structures (`detect`, `vmstructs`, `layout`), the kernel's settings for it
//! (`HS_PROCS`, `sonde_abi::hotspot`), and naming the Java frames the kernel stored in place among the
//! native ones: interpreted methods (`method`, `lines`) and compiled code with its inlined calls
//! (`scopes`, `unsigned5`), cached per process (`names`).

pub(crate) mod capture;
pub(crate) mod detect;
pub(crate) mod elf;
pub(crate) mod figures;
mod layout;
mod lines;
#[cfg(test)]
pub(crate) mod live;
mod method;
mod names;
pub(crate) mod naming;
#[cfg(test)]
mod naming_tests;
pub(crate) mod register;
mod scopes;
#[cfg(test)]
mod tests;
mod unsigned5;
pub(crate) mod vmstructs;

pub(crate) use capture::jvm_of;
pub(crate) use detect::{HotspotError, Jvm};
pub(crate) use names::JavaNames;

/// The runtime's name (`--runtimes java`), under which what it finds is kept.
pub(crate) const NAME: &str = super::Runtime::Java.name();
