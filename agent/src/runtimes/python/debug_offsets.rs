//! CPython 3.13's description of itself: `_PyRuntime` starts with `_Py_DebugOffsets`, a cookie, the
//! version and the offsets of the fields an out-of-process debugger needs, so sonde reads the layout
//! from the process instead of trusting a table.
//!
//! The field order is that of `Include/internal/pycore_runtime.h` at v3.13.0 (584 bytes, every
//! field a u64). 3.14 inserted fields (`interpreter_state.threads_main`, `set_object`, ...), so only
//! a 3.13 runtime parses; another version is an error, never a guess. The debug offsets lack one
//! value the symbolizer needs: where a compact non-ASCII string's characters start, which is
//! `sizeof(PyASCIIObject)` plus `utf8_length` and `utf8` (16 bytes) in every version since 3.3.

use sonde_abi::python::layout;

use super::offsets::Offsets;
use crate::runtimes::memory::ProcessMemory;

/// `_Py_Debug_Cookie`.
const COOKIE: &[u8; 8] = b"xdebugpy";
/// `sizeof(_Py_DebugOffsets)` in 3.13.
pub(crate) const SIZE_3_13: usize = 584;
/// Bytes `PyCompactUnicodeObject` adds to `PyASCIIObject` (`Py_ssize_t utf8_length; char *utf8`).
const COMPACT_EXTRA: u64 = 16;

/// Why a runtime's debug offsets were not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DebugOffsetsError {
    /// The runtime does not start with the cookie: not a 3.13+ runtime, or a wrong address.
    #[error(
        "_PyRuntime at {runtime:#x} does not start with the \"xdebugpy\" cookie (found {found:?}): not a CPython 3.13+ runtime"
    )]
    Cookie {
        /// Address read.
        runtime: u64,
        /// The 8 bytes found.
        found: [u8; 8],
    },
    /// A version whose `_Py_DebugOffsets` layout sonde does not know (3.14 changed it).
    #[error(
        "CPython {major}.{minor} lays out its debug offsets differently from 3.13; sonde reads only 3.13's: its Python frames stay unnamed"
    )]
    Layout {
        /// `PY_VERSION_HEX >> 24`.
        major: u8,
        /// `(PY_VERSION_HEX >> 16) & 0xff`.
        minor: u8,
    },
    /// A free-threaded (no-GIL) build: other object headers, not walked.
    #[error(
        "a free-threaded CPython {major}.{minor} build (python3.{minor}t): its Python frames are not supported, use the default build"
    )]
    FreeThreaded {
        /// Major version.
        major: u8,
        /// Minor version.
        minor: u8,
    },
    /// An offset that lies outside the structure size the runtime gives: corrupt or misread.
    #[error(
        "the debug offsets of CPython 3.13 give {field} = {offset} outside its structure of {size} bytes"
    )]
    Implausible {
        /// The field.
        field: &'static str,
        /// Its offset.
        offset: u64,
        /// Its structure's size.
        size: u64,
    },
    /// The process's memory could not be read.
    #[error("reading _PyRuntime's debug offsets at {runtime:#x}: {source}")]
    Unreadable {
        /// Address read.
        runtime: u64,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
}

/// Reads the debug offsets at the start of `_PyRuntime` (at `runtime` in `memory`).
pub(crate) fn read(
    memory: &ProcessMemory,
    runtime: u64,
) -> Result<((u8, u8), Offsets), DebugOffsetsError> {
    let mut bytes = [0; SIZE_3_13];
    memory
        .read(runtime, &mut bytes)
        .map_err(|source| DebugOffsetsError::Unreadable { runtime, source })?;
    parse(runtime, &bytes)
}

/// The version and offsets in `bytes`, the first [`SIZE_3_13`] bytes of `_PyRuntime` at `runtime`.
pub(crate) fn parse(
    runtime: u64,
    bytes: &[u8; SIZE_3_13],
) -> Result<((u8, u8), Offsets), DebugOffsetsError> {
    let mut found = [0; 8];
    found.copy_from_slice(&bytes[..8]);
    if &found != COOKIE {
        return Err(DebugOffsetsError::Cookie { runtime, found });
    }
    // The n-th u64 of the structure (the cookie is the 0th).
    let word =
        |n: usize| u64::from_le_bytes(bytes[n * 8..n * 8 + 8].try_into().unwrap_or_default());
    let hex = word(1);
    let (major, minor) = ((hex >> 24) as u8, (hex >> 16) as u8);
    if (major, minor) != (3, 13) {
        return Err(DebugOffsetsError::Layout { major, minor });
    }
    if word(2) != 0 {
        return Err(DebugOffsetsError::FreeThreaded { major, minor });
    }
    // Each group starts with its structure's size; every offset used must lie inside it.
    let field = |size_at: usize, at: usize, name: &'static str| {
        let (size, offset) = (word(size_at), word(at));
        if offset < size {
            Ok(offset)
        } else {
            Err(DebugOffsetsError::Implausible {
                field: name,
                offset,
                size,
            })
        }
    };
    const RUNTIME: usize = 3;
    const INTERP: usize = 6;
    const TSTATE: usize = 19;
    const FRAME: usize = 28;
    const CODE: usize = 34;
    const BYTES: usize = 64;
    const UNICODE: usize = 67;
    let ascii_size = word(UNICODE + 3);
    let offsets = Offsets {
        layout: layout::INTERP_FRAME_OWNER,
        runtime_interpreters_head: field(RUNTIME, RUNTIME + 2, "runtime_state.interpreters_head")?,
        runtime_gil_tstate: None,
        interp_threads_head: field(INTERP, INTERP + 3, "interpreter_state.threads_head")?,
        tstate_next: field(TSTATE, TSTATE + 2, "thread_state.next")?,
        tstate_native_tid: Some(field(TSTATE, TSTATE + 6, "thread_state.native_thread_id")?),
        tstate_pthread: Some(field(TSTATE, TSTATE + 5, "thread_state.thread_id")?),
        tstate_frame: field(TSTATE, TSTATE + 4, "thread_state.current_frame")?,
        cframe_current: None,
        frame_code: field(FRAME, FRAME + 2, "interpreter_frame.executable")?,
        frame_previous: field(FRAME, FRAME + 1, "interpreter_frame.previous")?,
        frame_instr: field(FRAME, FRAME + 3, "interpreter_frame.instr_ptr")?,
        frame_entry: Some(field(FRAME, FRAME + 5, "interpreter_frame.owner")?),
        // co_code_adaptive is the code object's variable tail: it starts at the object's size.
        code_bytecode: Some(word(CODE + 9)).filter(|&o| o <= word(CODE)),
        code_filename: field(CODE, CODE + 1, "code_object.filename")?,
        code_name: field(CODE, CODE + 2, "code_object.name")?,
        code_qualname: Some(field(CODE, CODE + 3, "code_object.qualname")?),
        code_firstlineno: field(CODE, CODE + 5, "code_object.firstlineno")?,
        code_linetable: field(CODE, CODE + 4, "code_object.linetable")?,
        unicode_state: field(UNICODE, UNICODE + 1, "unicode_object.state")?,
        unicode_ascii_data: ascii_size,
        unicode_compact_data: ascii_size + COMPACT_EXTRA,
        unicode_length: field(UNICODE, UNICODE + 2, "unicode_object.length")?,
        bytes_size: field(BYTES, BYTES + 1, "bytes_object.ob_size")?,
        // ob_sval is the bytes object's tail too.
        bytes_data: word(BYTES + 2),
    };
    if offsets.code_bytecode.is_none() {
        return Err(DebugOffsetsError::Implausible {
            field: "code_object.co_code_adaptive",
            offset: word(CODE + 9),
            size: word(CODE),
        });
    }
    // The kernel takes its offsets as u16 (`PyProc`).
    for (name, offset) in [
        (
            "interpreter_state.threads_head",
            offsets.interp_threads_head,
        ),
        ("thread_state.current_frame", offsets.tstate_frame),
        (
            "thread_state.native_thread_id",
            offsets.tstate_native_tid.unwrap_or(0),
        ),
        (
            "code_object.co_code_adaptive",
            offsets.code_bytecode.unwrap_or(0),
        ),
    ] {
        if offset >= u64::from(sonde_abi::python::OFFSET_NONE) {
            return Err(DebugOffsetsError::Implausible {
                field: name,
                offset,
                size: u64::from(sonde_abi::python::OFFSET_NONE),
            });
        }
    }
    if offsets.frame_span() > u64::from(sonde_abi::python::FRAME_SPAN_MAX) {
        return Err(DebugOffsetsError::Implausible {
            field: "interpreter_frame (span read by the kernel)",
            offset: offsets.frame_span(),
            size: u64::from(sonde_abi::python::FRAME_SPAN_MAX),
        });
    }
    Ok(((major, minor), offsets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::python::offsets::V3_13;

    /// `_Py_DebugOffsets` as CPython 3.13.0 lays it out (`Include/internal/pycore_runtime.h`) with
    /// the values a running 3.13.0 holds (pyenv's build, read with ctypes from its own `_PyRuntime`).
    fn cpython_3_13() -> [u8; SIZE_3_13] {
        #[rustfmt::skip]
        let words: [u64; 72] = [
            0x030d_00f0, // version: 3.13.0 final
            0,           // free_threaded
            // runtime_state: size, finalizing, interpreters_head
            283320, 608, 632,
            // interpreter_state: size, id, next, threads_head, gc, imports_modules, sysdict,
            // builtins, ceval_gil, gil_runtime_state, enabled, locked, holder
            194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768, 7760,
            // thread_state: size, prev, next, interp, current_frame, thread_id, native_thread_id,
            // datastack_chunk, status
            304, 0, 8, 16, 72, 152, 160, 232, 32,
            // interpreter_frame: size, previous, executable, instr_ptr, localsplus, owner
            80, 8, 0, 56, 72, 70,
            // code_object: size, filename, name, qualname, linetable, firstlineno, argcount,
            // localsplusnames, localspluskinds, co_code_adaptive
            208, 112, 120, 128, 136, 68, 52, 96, 104, 200,
            // pyobject (2), type_object (4), tuple (3), list (3), dict (3), float (2), long (3)
            16, 8,
            416, 24, 88, 168,
            32, 24, 16,
            40, 24, 16,
            48, 32, 40,
            24, 16,
            32, 16, 24,
            // bytes_object: size, ob_size, ob_sval
            40, 16, 32,
            // unicode_object: size, state, length, asciiobject_size
            64, 32, 16, 40,
            // gc: size, collecting
            240, 200,
        ];
        let mut bytes = [0; SIZE_3_13];
        bytes[..8].copy_from_slice(COOKIE);
        for (i, w) in words.iter().enumerate() {
            bytes[8 + i * 8..16 + i * 8].copy_from_slice(&w.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn parses_what_cpython_3_13_lays_out() {
        let (version, offsets) = parse(0x1000, &cpython_3_13()).unwrap();
        assert_eq!(version, (3, 13));
        assert_eq!(offsets, V3_13);
    }

    #[test]
    fn refuses_what_it_cannot_trust() {
        let mut bytes = cpython_3_13();
        bytes[0] = b'y';
        assert!(matches!(
            parse(0, &bytes),
            Err(DebugOffsetsError::Cookie { .. })
        ));

        let mut bytes = cpython_3_13();
        bytes[8..16].copy_from_slice(&0x030e_00f0u64.to_le_bytes());
        let err = parse(0, &bytes).unwrap_err();
        assert!(
            matches!(
                err,
                DebugOffsetsError::Layout {
                    major: 3,
                    minor: 14
                }
            ),
            "{err}"
        );

        let mut bytes = cpython_3_13();
        bytes[16] = 1;
        assert!(matches!(
            parse(0, &bytes),
            Err(DebugOffsetsError::FreeThreaded { .. })
        ));

        // thread_state.native_thread_id (word 25, counting the cookie as 0) beyond the thread state's size.
        let mut bytes = cpython_3_13();
        bytes[25 * 8..26 * 8].copy_from_slice(&4096u64.to_le_bytes());
        let err = parse(0, &bytes).unwrap_err();
        assert!(err.to_string().contains("native_thread_id"), "{err}");

        // Zeros, as a runtime read at a wrong address would give.
        assert!(parse(0, &[0; SIZE_3_13]).is_err());
    }
}
