//! Finding CPython in a captured process: the main binary or a mapped `libpython3.X.so` that exports
//! `_PyRuntime` (read once per binary, `super::elf`), its version (`Py_Version`, else the
//! file name), where `_PyRuntime` is in this process, and the structure offsets of that version (a
//! table up to 3.12, the runtime's own `_Py_DebugOffsets` from 3.13).

use std::sync::Arc;

use sonde_abi::{
    FileKey,
    python::{OFFSET_NONE, PyProc, origin},
};

use super::{
    NAME,
    debug_offsets::{self, DebugOffsetsError},
    elf::{PyElf, python_version_from_path},
    offsets::{self, Offsets},
};
use crate::{
    process::binary::{Binary, Mapping},
    runtimes::memory::ProcessMemory,
};

/// Why an interpreter was found but cannot be walked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PythonError {
    /// A version without offsets.
    #[error(
        "{binary} is CPython {}.{}, which sonde does not walk (3.9 to 3.13): its native frames are still shown",
        version.0, version.1
    )]
    Unsupported {
        /// The file exporting `_PyRuntime`.
        binary: String,
        /// (major, minor).
        version: (u8, u8),
    },
    /// Neither `Py_Version` nor the file name gives the version, and the runtime does not describe
    /// itself (no 3.13+ debug offsets).
    #[error(
        "{binary} exports _PyRuntime but sonde cannot tell its CPython version (no Py_Version, no python3.X in its name, no 3.13 debug offsets: {source}): its native frames are still shown"
    )]
    UnknownVersion {
        /// The file exporting `_PyRuntime`.
        binary: String,
        /// Why the debug offsets did not help.
        #[source]
        source: DebugOffsetsError,
    },
    /// A 3.13+ runtime whose debug offsets could not be used.
    #[error("{binary} is CPython {}.{}: {source}; its native frames are still shown", version.0, version.1)]
    DebugOffsets {
        /// The file exporting `_PyRuntime`.
        binary: String,
        /// (major, minor).
        version: (u8, u8),
        /// Why.
        #[source]
        source: DebugOffsetsError,
    },
    /// The process's memory could not be read (it exited, or sonde lacks CAP_SYS_PTRACE).
    #[error("reading the memory of process {pid}: {source} (sonde needs CAP_SYS_PTRACE)")]
    Unreadable {
        /// The process.
        pid: u32,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
}

impl PythonError {
    /// The interpreter binary this error is about, if it is about one (to warn once per binary).
    pub(crate) fn binary(&self) -> Option<&str> {
        match self {
            Self::Unsupported { binary, .. }
            | Self::UnknownVersion { binary, .. }
            | Self::DebugOffsets { binary, .. } => Some(binary),
            Self::Unreadable { .. } => None,
        }
    }
}

/// A CPython interpreter found in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Interpreter {
    /// (major, minor).
    pub(crate) version: (u8, u8),
    /// Runtime address of `_PyRuntime`.
    pub(crate) runtime: u64,
    /// The structure offsets of this version.
    pub(crate) offsets: Offsets,
    /// Path of the file exporting `_PyRuntime` (the interpreter or its `libpython`).
    pub(crate) binary: String,
    /// That file's identity (device, inode) and where its executable mapping puts its offset 0
    /// (`start - offset`), for the settings by binary.
    pub(crate) mapped: Option<((u64, u64), u64)>,
}

impl Interpreter {
    /// Whether `other` (a later capture of the same process, no exec between) is this interpreter.
    pub(crate) fn same_image(&self, other: &Interpreter) -> bool {
        (self.binary.as_str(), self.runtime, self.version)
            == (other.binary.as_str(), other.runtime, other.version)
    }

    /// What the kernel needs to walk this interpreter's frames (`PY_PROCS`).
    pub(crate) fn kernel_settings(&self) -> PyProc {
        let o = &self.offsets;
        // Offsets come from a table or were checked to fit by `debug_offsets`.
        let short = |v: u64| u16::try_from(v).unwrap_or(OFFSET_NONE);
        let opt = |v: Option<u64>| v.map_or(OFFSET_NONE, short);
        PyProc {
            interp_head: self.runtime + o.runtime_interpreters_head,
            // The GIL holder only matters when thread states cannot be matched by thread id.
            gil_tstate: match (o.tstate_native_tid, o.runtime_gil_tstate) {
                (None, Some(gil)) => self.runtime + gil,
                _ => 0,
            },
            layout: o.layout,
            frame_span: o.frame_span() as u32,
            interp_threads_head: short(o.interp_threads_head),
            tstate_next: short(o.tstate_next),
            tstate_native_tid: opt(o.tstate_native_tid),
            tstate_frame: short(o.tstate_frame),
            cframe_current: opt(o.cframe_current),
            frame_code: short(o.frame_code),
            frame_previous: short(o.frame_previous),
            frame_instr: short(o.frame_instr),
            frame_entry: opt(o.frame_entry),
            code_bytecode: opt(o.code_bytecode),
            tstate_pthread: opt(o.tstate_pthread),
            origin: origin::CAPTURE,
            code_name: short(o.code_name_field()),
            code_filename: short(o.code_filename),
            _pad: 0,
        }
    }

    /// The same settings by binary (`PY_FILES`): the addresses relative to the file's executable
    /// mapping, as the kernel relocates them for each process mapping the file.
    pub(crate) fn kernel_file_settings(&self) -> Option<(FileKey, PyProc)> {
        let ((dev, ino), base) = self.mapped?;
        let mut settings = self.kernel_settings();
        settings.interp_head = settings.interp_head.wrapping_sub(base);
        if settings.gil_tstate != 0 {
            settings.gil_tstate = settings.gil_tstate.wrapping_sub(base);
        }
        settings.origin = origin::BINARY;
        let file = FileKey {
            dev: crate::process::file_ids::kernel_dev(dev),
            _pad: 0,
            ino,
        };
        Some((file, settings))
    }
}

/// The CPython interpreter of process `pid`, given its executable mappings: Ok(None) when it has
/// none, an error when it has one sonde cannot walk.
pub(crate) fn detect(pid: u32, mappings: &[Mapping]) -> Result<Option<Interpreter>, PythonError> {
    let Some((binary, runtime, base)) = mappings.iter().find_map(|m| {
        let binary = m.binary.as_ref()?;
        let symbol = binary.fact::<PyElf>(NAME)?.runtime;
        let bias = crate::process::load_bias::load_bias(
            m.module.start,
            m.module.file_offset,
            &binary.elf.segments,
        );
        let base = m.module.start.wrapping_sub(m.module.file_offset);
        Some((binary, symbol.wrapping_add(bias), base))
    }) else {
        return Ok(None);
    };
    let mut found = interpreter(pid, binary, runtime)?;
    found.mapped = Some((binary.id, base));
    Ok(Some(found))
}

/// The interpreter in `binary`, whose `_PyRuntime` is at `runtime` in process `pid`.
fn interpreter(pid: u32, binary: &Arc<Binary>, runtime: u64) -> Result<Interpreter, PythonError> {
    let path = binary.path.clone();
    let version = binary
        .fact::<PyElf>(NAME)
        .and_then(|py| py.version)
        .or_else(|| python_version_from_path(&path));
    let found = |version, offsets| Interpreter {
        version,
        runtime,
        offsets,
        binary: path.clone(),
        mapped: None,
    };
    if let Some(v) = version {
        if let Some(offsets) = offsets::for_version(v.0, v.1) {
            return Ok(found(v, offsets));
        }
        if v < (3, 13) {
            return Err(PythonError::Unsupported {
                binary: path.clone(),
                version: v,
            });
        }
    }
    // 3.13 and later describe themselves; so may a runtime of unknown version.
    match debug_offsets::read(&ProcessMemory::new(pid), runtime) {
        Ok((read, offsets)) => Ok(found(read, offsets)),
        Err(DebugOffsetsError::Unreadable { source, .. }) => {
            Err(PythonError::Unreadable { pid, source })
        }
        Err(DebugOffsetsError::Layout { major, minor }) => Err(PythonError::Unsupported {
            binary: path.clone(),
            version: version.unwrap_or((major, minor)),
        }),
        Err(source) => Err(match version {
            Some(version) => PythonError::DebugOffsets {
                binary: path.clone(),
                version,
                source,
            },
            None => PythonError::UnknownVersion {
                binary: path.clone(),
                source,
            },
        }),
    }
}

#[cfg(test)]
mod tests;
