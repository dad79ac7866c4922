//! Where a thread keeps a thread-local variable of a process, as userspace read it from the
//! process's dynamic linker: an offset from the thread pointer (static TLS), or a module index into
//! the thread's dynamic thread vector (DTV) and an offset into that module's block. Shared by every
//! reader of a thread-local variable (the OpenTelemetry thread context, Ruby's execution context).

/// [`TlsPlace::mode`]: the variable is at the thread pointer plus `offset` (static TLS: the
/// executable's, a library loaded at start, or one a TLSDESC resolved statically).
pub const TLS_STATIC: u32 = 1;
/// [`TlsPlace::mode`]: the variable is at the thread's DTV entry `module` plus `offset` (the block
/// of a module `dlopen` loaded, allocated as each thread first touches it).
pub const TLS_DTV: u32 = 2;
/// [`TlsPlace::mode`]: not thread-local: the one variable every thread shares, at the absolute
/// address `offset` (a runtime from before thread-local storage: CRuby 2.7's
/// `ruby_current_execution_context_ptr`, which the VM points at the context of the thread holding
/// its lock).
pub const TLS_SHARED: u32 = 3;

/// Where a process's threads keep one thread-local variable.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct TlsPlace {
    /// [`TLS_STATIC`], [`TLS_DTV`] or [`TLS_SHARED`].
    pub mode: u32,
    /// [`TLS_DTV`]: the module's index in the DTV.
    pub module: u32,
    /// [`TLS_STATIC`]: bytes from the thread pointer to the variable (negative on x86_64, whose TLS
    /// sits below the thread pointer). [`TLS_DTV`]: bytes from the module's block to the variable.
    pub offset: i64,
    /// Bytes from the thread pointer to the thread's DTV pointer (architecture and C library:
    /// glibc and musl on x86_64 8, glibc on aarch64 0).
    pub dtv_at: i32,
    /// Bytes per DTV entry (glibc 16, musl 8).
    pub dtv_stride: u32,
    /// Bytes from the DTV pointer to the count of its entries (glibc `dtv[-1]`: -16; musl `dtv[0]`:
    /// 0): a module past it is one this thread never touched.
    pub dtv_len_at: i32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<TlsPlace>() == 32);
