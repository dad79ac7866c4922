//! CRuby's structure offsets, per version: the VM publishes none (no debug offsets, as CPython 3.13
//! has, nor VMStructs, as HotSpot has), and Debian's `libruby` is stripped of its DWARF. So they are
//! a table, from `vm_core.h`, `iseq.h` and `include/ruby/internal/core/rstring.h` of each release,
//! for x86_64 and AArch64 alike (LP64, no field whose size differs). Ruby 3.1 was checked here field
//! by field against Debian 12's `ruby3.1` (3.1.2) in a live process; the other rows follow the
//! upstream headers' changes listed with them.

use sonde_abi::ruby::RbProc;

/// What the kernel and the namer read of one Ruby version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// `sizeof(rb_control_frame_t)`: 56 (2.6-3.0: `pc sp iseq self ep block_code __bp__`), 64 (3.1,
    /// 3.2: `jit_return` added), 56 again (3.3+: `__bp__` removed).
    pub(crate) cfp_size: u16,
    /// The running context is the global `ruby_current_execution_context_ptr` (2.7), the context
    /// of the thread holding the VM's lock, rather than the thread-local `ruby_current_ec` (3.0+).
    pub(crate) shared_context: bool,
    /// `rb_iseq_constant_body.insns_info`: `.body` (entries), `.positions`, `.size`,
    /// `.succ_index_table`: 120/128/136/144 up to 3.1, 112/120/128/136 from 3.2 (a field before
    /// them removed).
    pub(crate) insns_body: u16,
    pub(crate) insns_positions: u16,
    pub(crate) insns_size: u16,
    pub(crate) succ_index_table: u16,
    /// `sizeof(struct iseq_insn_info_entry)`: `line_no events` (8) up to 3.0, `line_no node_id
    /// events` (12) from 3.1; `line_no` first in both.
    pub(crate) insn_info_size: u16,
    /// `rb_iseq_location_t.first_lineno` is a Fixnum `VALUE` up to 3.2, an `int` from 3.3.
    pub(crate) first_lineno_fixnum: bool,
    /// `RString`: up to 3.1 an embedded string's bytes start at 16 and its length is in the flags;
    /// from 3.2 `len` is at 16 for both kinds and the embedded bytes start at 24.
    pub(crate) string_len_field: bool,
    /// `rb_iseq_constant_body.local_iseq`: the method a block runs in.
    pub(crate) local_iseq: u16,
    /// A class's path is among its instance variables (`__classpath__`, up to 3.1), where sonde
    /// reads it (`super::owner`).
    pub(crate) class_paths_in_variables: bool,
    /// YJIT is 3.1's C implementation, whose code runs in one frame of a fixed shape
    /// (`platform::arch::YJIT_3_1_FRAME`); later YJITs are not described yet.
    pub(crate) yjit_3_1: bool,
}

/// `rb_execution_context_t`: `vm_stack`, `vm_stack_size`, `cfp`; the same from 2.5 to 3.4.
const EC: (u16, u16, u16) = (0, 8, 16);
/// 2.7: `rb_execution_context_t.thread_ptr` and `rb_thread_t.thread_id` (its `pthread_t`), checked
/// against a live Debian 11 `ruby2.7` (2.7.4) with two threads: the thread's `ec` points back, and
/// the id is its thread control block (which points to itself).
const THREAD_OF_CONTEXT: (u16, u16) = (56, 72);
/// `rb_control_frame_t`: `pc`, `iseq`, `ep`; the same from 2.5 to 3.4.
const CFP: (u16, u16, u16) = (0, 16, 32);
/// `rb_iseq_t.body`.
pub(crate) const ISEQ_BODY: u16 = 16;
/// `rb_iseq_constant_body`: `iseq_size` (u32), `iseq_encoded`, `location` (`pathobj`, `base_label`,
/// `label`, `first_lineno` in that order).
pub(crate) const BODY_SIZE: u64 = 4;
pub(crate) const BODY_ENCODED: u16 = 8;
pub(crate) const BODY_LOCATION: u64 = 64;

/// The versions sonde walks, for messages.
pub(crate) const SUPPORTED: &str = "2.7 to 3.4";

/// The layout of Ruby `version`, if sonde knows it.
pub(crate) fn layout(version: (u8, u8, u8)) -> Option<Layout> {
    let (major, minor, _) = version;
    let v = (major, minor);
    if !((2, 7)..=(3, 4)).contains(&v) {
        return None;
    }
    let before_3_2 = v < (3, 2);
    Some(Layout {
        // `ruby_current_ec` became thread-local in 3.0.
        shared_context: v < (3, 0),
        cfp_size: match v {
            (2, 7) | (3, 0) => 56,
            (3, 1) | (3, 2) => 64,
            _ => 56,
        },
        insns_body: if before_3_2 { 120 } else { 112 },
        insns_positions: if before_3_2 { 128 } else { 120 },
        insns_size: if before_3_2 { 136 } else { 128 },
        succ_index_table: if before_3_2 { 144 } else { 136 },
        insn_info_size: if v < (3, 1) { 8 } else { 12 },
        first_lineno_fixnum: v < (3, 3),
        string_len_field: !before_3_2,
        local_iseq: if before_3_2 { 176 } else { 168 },
        class_paths_in_variables: before_3_2,
        yjit_3_1: v == (3, 1),
    })
}

impl Layout {
    /// The kernel's settings for a process of this layout, with where its threads keep
    /// `ruby_current_ec`.
    pub(crate) fn kernel_settings(&self, ec: sonde_abi::tls::TlsPlace) -> RbProc {
        RbProc {
            ec,
            ec_stack: EC.0,
            ec_stack_size: EC.1,
            ec_cfp: EC.2,
            cfp_size: self.cfp_size,
            cfp_pc: CFP.0,
            cfp_iseq: CFP.1,
            cfp_ep: CFP.2,
            iseq_body: ISEQ_BODY,
            body_encoded: BODY_ENCODED,
            ec_thread: if self.shared_context {
                THREAD_OF_CONTEXT.0
            } else {
                0
            },
            thread_id: if self.shared_context {
                THREAD_OF_CONTEXT.1
            } else {
                0
            },
            _pad: [0; 1],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_outside_the_table_are_refused() {
        assert!(layout((2, 6, 10)).is_none());
        let l27 = layout((2, 7, 4)).unwrap();
        assert!(l27.shared_context && !l27.yjit_3_1);
        assert_eq!((l27.cfp_size, l27.insn_info_size), (56, 8));
        assert_eq!(l27.kernel_settings(Default::default()).ec_thread, 56);
        assert!(layout((3, 5, 0)).is_none());
        let l31 = layout((3, 1, 2)).unwrap();
        assert_eq!((l31.cfp_size, l31.insn_info_size), (64, 12));
        assert!(l31.first_lineno_fixnum && !l31.string_len_field);
        let l33 = layout((3, 3, 0)).unwrap();
        assert_eq!((l33.cfp_size, l33.insns_body), (56, 112));
        assert!(!l33.first_lineno_fixnum && l33.string_len_field);
        // Every field the kernel reads of a control frame lies within what it reads at once.
        for v in [
            (2, 7, 0),
            (3, 0, 0),
            (3, 1, 0),
            (3, 2, 0),
            (3, 3, 0),
            (3, 4, 0),
        ] {
            let p = layout(v).unwrap().kernel_settings(Default::default());
            for field in [p.cfp_pc, p.cfp_iseq, p.cfp_ep] {
                assert!(u32::from(field) + 8 <= sonde_abi::ruby::CFP_READ);
            }
        }
    }
}
