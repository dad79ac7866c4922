//! Integration tests: unwind. One test binary per area (each links the whole agent), one module per
//! case; the shared helpers are `crate::common` and its modules.

mod common;

mod unwind_deep_recursion;
mod unwind_distro_binaries;
mod unwind_dlopen;
mod unwind_eviction;
mod unwind_jit_fallback;
mod unwind_legacy_programs;
mod unwind_nofp_split;
mod unwind_offcpu_nofp;
mod unwind_rust_lld;
mod unwind_saved_tables;
mod unwind_short_lived;
mod unwind_signal_frame;
mod unwind_wrong_rows;
