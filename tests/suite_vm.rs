//! Integration tests: sonde inside Debian's own kernels (5.10, 6.1 and 6.12) booted under QEMU, one boot
//! per kernel with every scenario in it; the shared helpers are `crate::common` and its modules.

mod common;

mod vm_kernels;
