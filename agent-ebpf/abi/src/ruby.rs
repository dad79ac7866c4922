//! CRuby frames in user stacks: the per-process settings the kernel walks a Ruby thread's control
//! frames with, and how a Ruby frame is stored among the native frames of a [`crate::UserStack`].
//!
//! A Ruby thread's frames are not on the native stack: the VM keeps them in the thread's execution
//! context (`rb_execution_context_t`), a stack of control frames from `ec->cfp` (the running one) up
//! to the end of `ec->vm_stack`. The kernel finds the sampled thread's context through the
//! thread-local `ruby_current_ec` ([`RbProc::ec`]) and appends one word per frame running Ruby code
//! after the native frames, leaf to root, as CPython's walk does. The last frame one call of the
//! VM's loop ran (the frame the VM marks `VM_FRAME_FLAG_FINISH`) carries [`crate::appended::ENTRY`], so userspace
//! can give each native call of the loop the Ruby frames it ran.
//!
//! Each is a [`crate::appended`] word tagged [`crate::appended::RUBY`]: its object is the frame's
//! instruction sequence body (`rb_iseq_constant_body`, which holds its name, file and line table),
//! its position the instruction index its pc is at (in `VALUE`s from `iseq_encoded`).

/// Bytes of a control frame the kernel reads at once: every field it uses lies within them.
pub const CFP_READ: u32 = 48;

/// `VM_FRAME_MAGIC_MASK`: the bits of a frame's `ep[0]` flags that say what the frame is.
pub const FRAME_MAGIC_MASK: u64 = 0x7fff_0001;
/// Frame magics (`vm_core.h`) that run no instruction sequence: a C function (`CFUNC`), a C block
/// (`IFUNC`), the thread's bottom frame (`DUMMY`).
pub const MAGIC_CFUNC: u64 = 0x5555_0001;
pub const MAGIC_IFUNC: u64 = 0x6666_0001;
pub const MAGIC_DUMMY: u64 = 0x7999_0001;
/// A method's frame (`VM_FRAME_MAGIC_METHOD`): its `ep[-2]` is its method entry.
pub const MAGIC_METHOD: u64 = 0x1111_0001;
/// `VM_FRAME_FLAG_FINISH`: the frame returns from the VM's loop to its C caller.
pub const FRAME_FLAG_FINISH: u64 = 0x0020;
/// Bytes below `ep` read with it in one read: `ep[-2]` (the method entry or cref,
/// `VM_ENV_DATA_INDEX_ME_CREF`) and `ep[-1]`, then `ep[0]` (the flags), the same from 2.3 to 3.4. A
/// method frame's entry is announced with its iseq: its owner is the method's class.
pub const EP_BEFORE: u64 = 16;

/// One CRuby process's settings, written by userspace when it finds the interpreter (`RB_PROCS`, by
/// tgid). Offsets are in bytes, for the process's Ruby version.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct RbProc {
    /// Where its threads keep `ruby_current_ec` (the running execution context).
    pub ec: crate::tls::TlsPlace,
    /// `rb_execution_context_t.vm_stack`, `.vm_stack_size` (in `VALUE`s) and `.cfp`.
    pub ec_stack: u16,
    pub ec_stack_size: u16,
    pub ec_cfp: u16,
    /// `sizeof(rb_control_frame_t)`.
    pub cfp_size: u16,
    /// `rb_control_frame_t.pc`, `.iseq` and `.ep` (each below [`CFP_READ`]).
    pub cfp_pc: u16,
    pub cfp_iseq: u16,
    pub cfp_ep: u16,
    /// `rb_iseq_t.body`.
    pub iseq_body: u16,
    /// `rb_iseq_constant_body.iseq_encoded`.
    pub body_encoded: u16,
    /// With a shared execution context (2.7, `TLS_SHARED`): `rb_execution_context_t.thread_ptr`
    /// and `rb_thread_t.thread_id` (the thread's `pthread_t`), so a thread is walked only when the
    /// context is its own (it holds the VM's lock); 0 when the context is thread-local.
    pub ec_thread: u16,
    pub thread_id: u16,
    pub _pad: [u16; 1],
}
const _: () = assert!(core::mem::size_of::<RbProc>() == 56);
