//! Structure offsets of each supported CPython version: what the kernel needs to walk thread states and
//! frames (turned into a `sonde_abi::python::PyProc`), and what userspace needs to read code objects and
//! their strings. All offsets are in bytes, for 64-bit little-endian builds.

use sonde_abi::python::layout;

/// The offsets of one CPython minor version (3.9 to 3.12 from the table below; 3.13+ from the
/// `_Py_DebugOffsets` the runtime carries, see `debug_offsets`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Offsets {
    /// `sonde_abi::python::layout`.
    pub(crate) layout: u32,
    /// `_PyRuntimeState.interpreters.head`.
    pub(crate) runtime_interpreters_head: u64,
    /// `_PyRuntimeState.gilstate.tstate_current` (used only without `tstate_native_tid`).
    pub(crate) runtime_gil_tstate: Option<u64>,
    /// `PyInterpreterState.threads.head` (`tstate_head` before 3.11).
    pub(crate) interp_threads_head: u64,
    /// `PyThreadState.next`.
    pub(crate) tstate_next: u64,
    /// `PyThreadState.native_thread_id`, where it exists.
    pub(crate) tstate_native_tid: Option<u64>,
    /// `PyThreadState.thread_id` (`pthread_self()`): how the kernel recognises a thread without a
    /// native thread id (3.9, 3.10), by its fs base.
    pub(crate) tstate_pthread: Option<u64>,
    /// `PyThreadState.frame` / `.cframe` / `.current_frame`.
    pub(crate) tstate_frame: u64,
    /// `_PyCFrame.current_frame` (3.11, 3.12).
    pub(crate) cframe_current: Option<u64>,
    /// `f_code` / `f_executable`.
    pub(crate) frame_code: u64,
    /// `f_back` / `previous`.
    pub(crate) frame_previous: u64,
    /// `f_lasti` / `prev_instr` / `instr_ptr`.
    pub(crate) frame_instr: u64,
    /// `is_entry` (3.11) / `owner` (3.12+).
    pub(crate) frame_entry: Option<u64>,
    /// `PyCodeObject.co_code_adaptive` (3.11+).
    pub(crate) code_bytecode: Option<u64>,
    /// `co_filename`.
    pub(crate) code_filename: u64,
    /// `co_name`.
    pub(crate) code_name: u64,
    /// `co_qualname` (3.11+).
    pub(crate) code_qualname: Option<u64>,
    /// `co_firstlineno` (an int).
    pub(crate) code_firstlineno: u64,
    /// `co_linetable` (3.10+) or `co_lnotab` (3.9): a bytes object.
    pub(crate) code_linetable: u64,
    /// `PyASCIIObject.state` (the bit field: kind, compact, ascii).
    pub(crate) unicode_state: u64,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start.
    pub(crate) unicode_ascii_data: u64,
    /// `sizeof(PyCompactUnicodeObject)`: where a compact non-ASCII string's characters start.
    pub(crate) unicode_compact_data: u64,
    /// `PyASCIIObject.length`.
    pub(crate) unicode_length: u64,
    /// `PyVarObject.ob_size` of a bytes object.
    pub(crate) bytes_size: u64,
    /// `PyBytesObject.ob_sval`.
    pub(crate) bytes_data: u64,
}

/// The table of `major.minor` (3.9 to 3.12), or None for any other version (3.13+ describe
/// themselves: see `debug_offsets`).
pub(crate) fn for_version(major: u8, minor: u8) -> Option<Offsets> {
    match (major, minor) {
        (3, 9) => Some(V3_9),
        (3, 10) => Some(V3_10),
        (3, 11) => Some(V3_11),
        (3, 12) => Some(V3_12),
        _ => None,
    }
}

// Where the values come from: `offsetof()`/`sizeof()` compiled with `Py_BUILD_CORE` against the
// headers of the pyenv builds on the CI machine (3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0, under
// /root/.pyenv/versions/*/include) and, for 3.11, also against Debian's python3.11-dev 3.11.2
// (`/usr/include/python3.11`, same values). The field orders match py-spy's bindgen output
// (`src/python_bindings/v3_9_5.rs` ... `v3_12_0.rs`, py-spy 0.4.2), e.g. 3.12's
// `PyThreadState.native_thread_id` at 144, and 3.10 agrees with Meta's strobelight
// (`strobelight/bpf_lib/python/discovery/Py310Offsets.cpp`: frame 24, f_back 24, f_code 32,
// f_lasti 96, co_filename 104, tstate_current 568). CPython keeps these layouts within a minor
// release. `tests::matches_the_installed_headers` repeats the `offsetof` check for every version
// whose headers are installed, and `detect`'s tests walk a running interpreter of each version.

/// CPython 3.9: `PyFrameObject` chain from `PyThreadState.frame`; thread states carry no native
/// thread id, so the kernel takes the GIL holder `_PyRuntime.gilstate.tstate_current`; `f_lasti` is
/// a byte offset; `co_lnotab` is the line table.
const V3_9: Offsets = Offsets {
    layout: layout::FRAME_OBJECT,
    runtime_interpreters_head: 32,
    runtime_gil_tstate: Some(568),
    interp_threads_head: 8,
    tstate_next: 8,
    tstate_native_tid: None,
    tstate_pthread: Some(176),
    tstate_frame: 24,
    cframe_current: None,
    frame_code: 32,
    frame_previous: 24,
    frame_instr: 104,
    frame_entry: None,
    code_bytecode: None,
    code_filename: 104,
    code_name: 112,
    code_qualname: None,
    code_firstlineno: 40,
    code_linetable: 120,
    unicode_state: 32,
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
    unicode_length: 16,
    bytes_size: 16,
    bytes_data: 32,
};

/// CPython 3.10: as 3.9, but `f_lasti` counts code units and sits at 96, and `co_linetable` (the
/// 3.10 format) replaces `co_lnotab` at the same place.
const V3_10: Offsets = Offsets {
    frame_instr: 96,
    ..V3_9
};

/// CPython 3.11: `_PyInterpreterFrame`s reached through `PyThreadState.cframe->current_frame`,
/// `is_entry` marks the first frame of each `_PyEval_EvalFrameDefault` call; thread states carry
/// `native_thread_id`.
const V3_11: Offsets = Offsets {
    layout: layout::INTERP_FRAME_IS_ENTRY,
    runtime_interpreters_head: 40,
    runtime_gil_tstate: Some(576),
    interp_threads_head: 16,
    tstate_next: 8,
    tstate_native_tid: Some(160),
    tstate_pthread: Some(152),
    tstate_frame: 56,
    cframe_current: Some(8),
    frame_code: 32,
    frame_previous: 48,
    frame_instr: 56,
    frame_entry: Some(68),
    code_bytecode: Some(184),
    code_filename: 112,
    code_name: 120,
    code_qualname: Some(128),
    code_firstlineno: 72,
    code_linetable: 136,
    unicode_state: 32,
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
    unicode_length: 16,
    bytes_size: 16,
    bytes_data: 32,
};

/// CPython 3.12: as 3.11, but each evaluation-loop call pushes a shim frame owned by the C stack
/// (`owner`); `_PyRuntime.gilstate.tstate_current` is gone (the current thread state is only in
/// TLS), which `native_thread_id` makes unnecessary; `PyASCIIObject` lost `wstr` (40 bytes).
const V3_12: Offsets = Offsets {
    layout: layout::INTERP_FRAME_OWNER,
    runtime_interpreters_head: 40,
    runtime_gil_tstate: None,
    interp_threads_head: 72,
    tstate_next: 8,
    tstate_native_tid: Some(144),
    tstate_pthread: Some(136),
    tstate_frame: 56,
    cframe_current: Some(0),
    frame_code: 0,
    frame_previous: 8,
    frame_instr: 56,
    frame_entry: Some(70),
    code_bytecode: Some(192),
    code_filename: 112,
    code_name: 120,
    code_qualname: Some(128),
    code_firstlineno: 68,
    code_linetable: 136,
    unicode_state: 32,
    unicode_ascii_data: 40,
    unicode_compact_data: 56,
    unicode_length: 16,
    bytes_size: 16,
    bytes_data: 32,
};

/// CPython 3.13.0, from the same headers (as 3.12 but for the fields below): what `debug_offsets` must find in a 3.13 runtime (the
/// tests compare; sonde itself reads 3.13's offsets from the process).
#[cfg(test)]
pub(crate) const V3_13: Offsets = Offsets {
    runtime_interpreters_head: 632,
    interp_threads_head: 7344,
    tstate_native_tid: Some(160),
    tstate_pthread: Some(152),
    tstate_frame: 72,
    cframe_current: None,
    code_bytecode: Some(200),
    ..V3_12
};

impl Offsets {
    /// Where a code object's name is: `co_qualname` (3.11+, `Class.method`), else `co_name`.
    pub(crate) fn code_name_field(&self) -> u64 {
        self.code_qualname.unwrap_or(self.code_name)
    }

    /// Bytes the kernel reads of a frame at once: up to the end of the last field it needs, rounded
    /// up to 8 (`f_lasti` is an int, the other fields pointers, `is_entry`/`owner` a byte).
    pub(crate) fn frame_span(&self) -> u64 {
        let instr_size = if self.layout == layout::FRAME_OBJECT {
            4
        } else {
            8
        };
        let end = [
            self.frame_code + 8,
            self.frame_previous + 8,
            self.frame_instr + instr_size,
            self.frame_entry.map_or(0, |e| e + 1),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        end.next_multiple_of(8)
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::HashMap, path::Path, process::Command};

    use super::*;

    #[test]
    fn only_the_tabled_versions_have_a_table() {
        for minor in 9..=12 {
            assert!(for_version(3, minor).is_some(), "3.{minor}");
        }
        for (major, minor) in [(3, 8), (3, 13), (3, 14), (2, 7), (4, 0)] {
            assert_eq!(for_version(major, minor), None, "{major}.{minor}");
        }
    }

    #[test]
    fn frame_spans_cover_the_fields_the_kernel_reads() {
        let span = |minor| for_version(3, minor).unwrap().frame_span();
        // 3.9: f_lasti (an int) at 104 ends at 108; 3.10 at 96 ends at 100.
        assert_eq!((span(9), span(10)), (112, 104));
        // 3.11: is_entry at 68; 3.12 and 3.13: owner at 70.
        assert_eq!((span(11), span(12), V3_13.frame_span()), (72, 72, 72));
        for minor in 9..=12 {
            assert!(span(minor) <= u64::from(sonde_abi::python::FRAME_SPAN_MAX));
        }
    }

    /// The C side of [`matches_the_installed_headers`]: prints `name value` per field of [`Offsets`].
    const PROBE: &str = r#"
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#define P(name, expr) printf("%s %zu\n", name, (size_t)(expr))
int main(void) {
  P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_MINOR_VERSION <= 11
  P("runtime_gil_tstate", offsetof(_PyRuntimeState, gilstate.tstate_current));
#endif
#if PY_MINOR_VERSION >= 11
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
  P("tstate_native_tid", offsetof(PyThreadState, native_thread_id));
#else
  P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_pthread", offsetof(PyThreadState, thread_id));
#if PY_MINOR_VERSION <= 10
  P("tstate_frame", offsetof(PyThreadState, frame));
  P("frame_previous", offsetof(PyFrameObject, f_back));
  P("frame_code", offsetof(PyFrameObject, f_code));
  P("frame_instr", offsetof(PyFrameObject, f_lasti));
#elif PY_MINOR_VERSION <= 12
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("cframe_current", offsetof(_PyCFrame, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#else
  P("tstate_frame", offsetof(PyThreadState, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_MINOR_VERSION == 11
  P("frame_entry", offsetof(_PyInterpreterFrame, is_entry));
#elif PY_MINOR_VERSION >= 12
  P("frame_entry", offsetof(_PyInterpreterFrame, owner));
#endif
#if PY_MINOR_VERSION >= 11
  P("code_bytecode", offsetof(PyCodeObject, co_code_adaptive));
  P("code_qualname", offsetof(PyCodeObject, co_qualname));
#endif
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
  P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_MINOR_VERSION >= 10
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
#else
  P("code_linetable", offsetof(PyCodeObject, co_lnotab));
#endif
  P("unicode_state", offsetof(PyASCIIObject, state));
  P("unicode_length", offsetof(PyASCIIObject, length));
  P("unicode_ascii_data", sizeof(PyASCIIObject));
  P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
  P("bytes_size", offsetof(PyVarObject, ob_size));
  P("bytes_data", offsetof(PyBytesObject, ob_sval));
  return 0;
}
"#;

    /// The fields of `o` by the names [`PROBE`] prints (absent fields left out).
    fn named(o: &Offsets) -> HashMap<&'static str, u64> {
        let mut m = HashMap::from([
            ("runtime_interpreters_head", o.runtime_interpreters_head),
            ("interp_threads_head", o.interp_threads_head),
            ("tstate_next", o.tstate_next),
            ("tstate_frame", o.tstate_frame),
            ("frame_code", o.frame_code),
            ("frame_previous", o.frame_previous),
            ("frame_instr", o.frame_instr),
            ("code_filename", o.code_filename),
            ("code_name", o.code_name),
            ("code_firstlineno", o.code_firstlineno),
            ("code_linetable", o.code_linetable),
            ("unicode_state", o.unicode_state),
            ("unicode_length", o.unicode_length),
            ("unicode_ascii_data", o.unicode_ascii_data),
            ("unicode_compact_data", o.unicode_compact_data),
            ("bytes_size", o.bytes_size),
            ("bytes_data", o.bytes_data),
        ]);
        for (name, value) in [
            ("runtime_gil_tstate", o.runtime_gil_tstate),
            ("tstate_native_tid", o.tstate_native_tid),
            ("tstate_pthread", o.tstate_pthread),
            ("cframe_current", o.cframe_current),
            ("frame_entry", o.frame_entry),
            ("code_bytecode", o.code_bytecode),
            ("code_qualname", o.code_qualname),
        ] {
            if let Some(v) = value {
                m.insert(name, v);
            }
        }
        m
    }

    /// Compiles [`PROBE`] against the headers in `include` and returns what it prints.
    fn probe(include: &Path) -> HashMap<String, u64> {
        let dir = std::env::temp_dir().join(format!(
            "sonde-py-offsets-{}-{}",
            std::process::id(),
            include.display().to_string().replace('/', "_")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (source, bin) = (dir.join("probe.c"), dir.join("probe"));
        std::fs::write(&source, PROBE).unwrap();
        let built = Command::new("gcc")
            .arg("-w")
            .arg("-I")
            .arg(include)
            .arg("-o")
            .arg(&bin)
            .arg(&source)
            .status()
            .expect("gcc must be installed (cargo xtask setup --peers)");
        assert!(built.success(), "compiling the probe against {include:?}");
        let out = Command::new(&bin).output().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (name, value) = l.split_once(' ').unwrap();
                (name.to_owned(), value.parse().unwrap())
            })
            .collect()
    }

    /// Every CPython header set on this machine (pyenv builds, Debian's python3-dev) agrees with
    /// its table; the CI machine has at least pyenv's 3.11.7.
    #[test]
    fn matches_the_installed_headers() {
        let mut includes: Vec<(u8, std::path::PathBuf)> = Vec::new();
        let debian = Path::new("/usr/include/python3.11");
        if debian.join("internal/pycore_frame.h").exists() {
            includes.push((11, debian.to_owned()));
        }
        for entry in std::fs::read_dir("/root/.pyenv/versions")
            .into_iter()
            .flatten()
        {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let mut parts = name.split('.');
            let (Some("3"), Some(minor)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(minor) = minor.parse::<u8>() else {
                continue;
            };
            let include = Path::new("/root/.pyenv/versions")
                .join(&name)
                .join(format!("include/python3.{minor}"));
            if (9..=13).contains(&minor) && include.join("Python.h").exists() {
                includes.push((minor, include));
            }
        }
        assert!(
            includes.iter().any(|(minor, _)| *minor == 11),
            "no CPython 3.11 headers: install python3-dev or pyenv's 3.11.7 (as on the CI machine)"
        );
        for (minor, include) in &includes {
            let table = for_version(3, *minor).unwrap_or(V3_13);
            let expected: HashMap<String, u64> = named(&table)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            assert_eq!(probe(include), expected, "3.{minor} at {include:?}");
            eprintln!("3.{minor}: the table matches {}", include.display());
        }
    }
}
