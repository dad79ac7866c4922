//! PHP's structure offsets, per version: the executor publishes none and Debian strips its DWARF,
//! so they are a table, from `zend_globals.h`, `zend_compile.h` and `zend_types.h` of each release,
//! for x86_64 and AArch64 alike (LP64). PHP 8.2 was checked here field by field against Debian 12's
//! `php8.2` (8.2.36) in a live process; the other rows follow the upstream headers' changes listed
//! with them (and agree with the OpenTelemetry eBPF profiler's table).

use sonde_abi::php::PhpProc;

/// What the kernel and the namer read of one PHP version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// `zend_executor_globals.current_execute_data`: 488 from 7.4 to 8.4, 512 from 8.5.
    pub(crate) current_execute_data: u16,
    /// `zend_op_array.filename` and `.line_start`, which move as fields before them come and go:
    /// 136 in 7.4, 144 in 8.0 and 8.1, 152 in 8.2, 144 in 8.3, 168 from 8.4.
    pub(crate) filename: u16,
    pub(crate) line_start: u16,
}

/// `zend_execute_data`: `opline`, `func`, `This.u1.type_info`, `prev_execute_data`; the same from
/// 7.0 to 8.5.
const EXECUTE_DATA: (u16, u16, u16, u16) = (0, 24, 40, 48);
/// `zend_function.common`: `type` (u8), `function_name`, `scope`; the same from 7.0 to 8.5.
pub(crate) const FUNC_TYPE: u16 = 0;
pub(crate) const FUNC_NAME: u64 = 8;
pub(crate) const FUNC_SCOPE: u64 = 16;
/// `zend_class_entry.name`.
pub(crate) const CLASS_NAME: u64 = 8;
/// `zend_string`: `len`, then the bytes (`val`).
pub(crate) const STRING_LEN: u64 = 16;
pub(crate) const STRING_VAL: u64 = 24;
/// `zend_op.lineno`: after `handler` and four 32-bit operands.
const OP_LINENO: u16 = 24;

/// The versions sonde knows, as said to a user whose PHP is not one.
pub(crate) const SUPPORTED: &str = "7.4 to 8.5, non-thread-safe builds";

/// The layout of PHP `major.minor`, if sonde knows it.
pub(crate) fn layout((major, minor, _patch): (u8, u8, u8)) -> Option<Layout> {
    let (current_execute_data, filename) = match (major, minor) {
        (7, 4) => (488, 136),
        (8, 0 | 1) => (488, 144),
        (8, 2) => (488, 152),
        (8, 3) => (488, 144),
        (8, 4) => (488, 168),
        (8, 5) => (512, 168),
        _ => return None,
    };
    Some(Layout {
        current_execute_data,
        filename,
        line_start: filename + 8,
    })
}

impl Layout {
    /// What the kernel walks a process with, whose `executor_globals` is at `executor_globals`.
    pub(crate) fn kernel_settings(&self, executor_globals: u64) -> PhpProc {
        let (ex_opline, ex_func, ex_call_info, ex_prev) = EXECUTE_DATA;
        PhpProc {
            current_execute_data: executor_globals + u64::from(self.current_execute_data),
            ex_opline,
            ex_func,
            ex_call_info,
            ex_prev,
            func_type: FUNC_TYPE,
            op_lineno: OP_LINENO,
            _pad: [0; 2],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_versions_only_and_fields_within_the_kernels_read() {
        assert!(layout((7, 3, 33)).is_none() && layout((8, 6, 0)).is_none());
        let l = layout((8, 2, 36)).unwrap();
        assert_eq!(
            (l.current_execute_data, l.filename, l.line_start),
            (488, 152, 160)
        );
        let s = l.kernel_settings(0x1000);
        assert_eq!(s.current_execute_data, 0x1000 + 488);
        for at in [s.ex_opline, s.ex_func, s.ex_call_info, s.ex_prev] {
            assert!(u32::from(at) + 8 <= sonde_abi::php::FRAME_READ);
        }
    }
}
