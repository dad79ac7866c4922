//! CRuby frames in user stacks: the per-process settings the kernel walks a Ruby thread's control
//! frames with, and how a Ruby frame is stored among the native frames of a [`crate::UserStack`].
//!
//! A Ruby thread's frames are not on the native stack: the VM keeps them in the thread's execution
//! context (`rb_execution_context_t`), a stack of control frames from `ec->cfp` (the running one) up
//! to the end of `ec->vm_stack`. The kernel finds the sampled thread's context through the
//! thread-local `ruby_current_ec` ([`RbProc::ec`]) and appends one word per frame running Ruby code
//! after the native frames, leaf to root, as CPython's walk does. The last frame one call of the
//! VM's loop ran (the frame the VM marks `VM_FRAME_FLAG_FINISH`) carries [`RB_FINISH`], so userspace
//! can give each native call of the loop the Ruby frames it ran.
//!
//! A word: [`RB_FRAME`] | [`RB_FINISH`]? | position << 45 | body >> 3, where body is the frame's
//! instruction sequence body (`rb_iseq_constant_body`, which holds its name, file and line table)
//! and position the instruction index its pc is at (in `VALUE`s from `iseq_encoded`).

/// Marks a stored frame as a Ruby frame (bits 63-60 are 0b0001: neither a native address, below
/// 2^48 with at most `FRAME_EXACT` set, nor a file-relative, runtime or Python word).
pub const RB_FRAME: u64 = 1 << 60;
/// On a Ruby frame: the first (root-most) frame its call of the VM's loop ran.
pub const RB_FINISH: u64 = 1 << 59;
/// Bits of the body's address, stored shifted right by 3 (malloc'd, 16-byte aligned).
const BODY_BITS: u32 = 45;
/// Largest position stored; larger ones are clamped (an iseq of 16 Ki words).
pub const RB_POSITION_MAX: u64 = (1 << 14) - 1;
/// The tag bits.
const TAG_MASK: u64 = 0xf << 60;

/// Stores one Ruby frame.
#[inline(always)]
pub const fn pack_frame(body: u64, position: u64, finish: bool) -> u64 {
    let position = if position > RB_POSITION_MAX {
        RB_POSITION_MAX
    } else {
        position
    };
    let finish = if finish { RB_FINISH } else { 0 };
    RB_FRAME | finish | position << BODY_BITS | (body >> 3 & ((1 << BODY_BITS) - 1))
}

/// A stored Ruby frame, unpacked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RbFrame {
    /// Address of the instruction sequence's body in the process.
    pub body: u64,
    /// Instruction index of the frame's pc.
    pub position: u32,
    /// The first frame of its call of the VM's loop.
    pub finish: bool,
}

/// The Ruby frame stored in `word`, or None for any other word.
pub const fn unpack_frame(word: u64) -> Option<RbFrame> {
    if word & TAG_MASK != RB_FRAME {
        return None;
    }
    Some(RbFrame {
        body: (word & ((1 << BODY_BITS) - 1)) << 3,
        position: ((word >> BODY_BITS) & RB_POSITION_MAX) as u32,
        finish: word & RB_FINISH != 0,
    })
}

/// Bytes of a control frame the kernel reads at once: every field it uses lies within them.
pub const CFP_READ: u32 = 48;

/// `VM_FRAME_MAGIC_MASK`: the bits of a frame's `ep[0]` flags that say what the frame is.
pub const FRAME_MAGIC_MASK: u64 = 0x7fff_0001;
/// Frame magics (`vm_core.h`) that run no instruction sequence: a C function (`CFUNC`), a C block
/// (`IFUNC`), the thread's bottom frame (`DUMMY`).
pub const MAGIC_CFUNC: u64 = 0x5555_0001;
pub const MAGIC_IFUNC: u64 = 0x6666_0001;
pub const MAGIC_DUMMY: u64 = 0x7999_0001;
/// `VM_FRAME_FLAG_FINISH`: the frame returns from the VM's loop to its C caller.
pub const FRAME_FLAG_FINISH: u64 = 0x0020;

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
    pub _pad: [u16; 3],
}
const _: () = assert!(core::mem::size_of::<RbProc>() == 56);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_are_no_other_word() {
        for body in [0x5561_dbf5_7cb0, 0xffff_b9a4_4010] {
            let f = unpack_frame(pack_frame(body, 23, true)).unwrap();
            assert_eq!(
                f,
                RbFrame {
                    body,
                    position: 23,
                    finish: true
                }
            );
            let word = pack_frame(body, 1 << 20, false);
            assert_eq!(unpack_frame(word).unwrap().position as u64, RB_POSITION_MAX);
            assert!(crate::python::unpack_frame(word).is_none());
            assert!(crate::unwind::unpack_file_frame(word).is_none());
            assert!(!crate::runtime_frame::is_runtime_word(word));
        }
        assert_eq!(unpack_frame(0x7fff_0000_1234), None);
        assert_eq!(unpack_frame(crate::unwind::FRAME_EXACT | 0x1234), None);
        assert_eq!(
            unpack_frame(crate::python::pack_frame(0x7f00_0000_1000, 3, true)),
            None
        );
        let [head, data] = crate::runtime_frame::pack(3, 0x1000, true, 5, 7);
        assert_eq!((unpack_frame(head), unpack_frame(data)), (None, None));
    }
}
