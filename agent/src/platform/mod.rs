//! The two axes sonde runs across besides runtimes, each behind one seam: the processor architecture
//! (`arch`, one module per architecture, chosen at build time) and the running kernel's features
//! (`kernel`, probed once at start). No other module names an architecture or a kernel version: they
//! ask these.

pub(crate) mod arch;
pub mod kernel;
