//! The user part of a stack: its words in place (`words`): native frames named through the process's
//! mappings (binaries by blazesym or Go's table, JIT code by the perf map), file-relative frames
//! through their binary, runtime frames (Java, JavaScript) by `runtime`, V8's builtins and stubs as
//! native code under their V8 name; then the Python frames merged in place of the evaluation loop's.
//! Every unnamed native frame is noted with its binary and the reason.

use std::{borrow::Cow, sync::Arc};

use sonde_abi::{
    python::unpack_frame,
    unwind::{FRAME_EXACT, unpack_file_frame},
};

use super::{
    Reason, Symbolizer,
    debuginfo::Resolved,
    lookup::empty,
    marker,
    runtime::{Caches, RuntimeCounts},
    unmapped::UNMAPPED,
    words::{
        Word, file_lookup_offset, file_offset, in_place, marker_ip, native_words,
        user_lookup_address,
    },
};
use crate::{
    bpf::drain::{RawSample, RawStack},
    process::{JIT_PATH, ProcessInfo, file_ids::FileEntry},
    profile::{Frame, FrameKind, Symbol},
    runtimes::python::merge::{PyFrame, merge},
};

impl Symbolizer {
    /// The user frames of `s`, Python frames merged in place of the evaluation loop's; each unnamed
    /// native frame adds its binary and the reason to `unnamed`.
    pub(super) fn push_user<'a>(
        &self,
        s: &RawSample,
        info: Option<&'a ProcessInfo>,
        frames: &mut Vec<Frame>,
        unnamed: &mut Vec<(Cow<'a, str>, Reason)>,
    ) -> (PythonCounts, RuntimeCounts) {
        let mut runtimes = RuntimeCounts::default();
        let RawStack::Frames(ips) = &s.user else {
            frames.extend(marker(&s.user, "user"));
            return (PythonCounts::default(), runtimes);
        };
        let (native, py) = self.split_user(s, ips, info, unnamed, &mut runtimes);
        let words = ips.iter().filter(|&&w| unpack_frame(w).is_some()).count();
        let counts = PythonCounts {
            frames: py.len() as u64,
            unreadable: py.iter().filter(|f| f.frame.symbols.is_empty()).count() as u64,
            // Without the interpreter nothing can name them (the kernel should not have walked it).
            dropped: (words - py.len()) as u64,
        };
        frames.extend(merge(native, py));
        (counts, runtimes)
    }

    /// The native and runtime frames of `ips` in place and, when the process's interpreter is known,
    /// its Python frames.
    fn split_user<'a>(
        &self,
        s: &RawSample,
        ips: &[u64],
        info: Option<&'a ProcessInfo>,
        unnamed: &mut Vec<(Cow<'a, str>, Reason)>,
        runtimes: &mut RuntimeCounts,
    ) -> (Vec<Frame>, Vec<PyFrame>) {
        let interpreter = info.and_then(crate::runtimes::python::interpreter_of);
        let mut py = Vec::new();
        if let Some(interpreter) = &interpreter {
            py.extend(
                ips.iter()
                    .filter_map(|&w| unpack_frame(w))
                    .map(|word| PyFrame {
                        frame: self.python_names().frame(s.key.tgid, interpreter, word),
                        entry: word.entry,
                    }),
            );
        }
        let (mut java_names, mut v8_names) = (self.java_names(), self.v8_names());
        let caches = Caches {
            java: &mut java_names,
            v8: &mut v8_names,
        };
        let mut frames = Vec::with_capacity(ips.len());
        for (i, word) in in_place(ips) {
            let ip = match word {
                Word::Native(ip) => ip,
                Word::Runtime(f) => {
                    match (marker_ip(f), info.and_then(crate::runtimes::v8::node_of)) {
                        (Some(ip), Some(node)) => {
                            // A V8 builtin or stub: named as native code, under its V8 name.
                            let mut frame = self.native_frame(s, info, ip, i, &mut Vec::new());
                            let native = frame.symbols.last().map(|s| s.name.as_str());
                            let name = crate::runtimes::v8::marker_name(
                                native,
                                &node,
                                u64::from(f.position),
                            );
                            frame.symbols = Arc::from(vec![Symbol {
                                name,
                                file: None,
                                line: None,
                            }]);
                            runtimes.marker();
                            frames.push(frame);
                        }
                        _ => frames.extend(runtimes.frame(&caches, info, f)),
                    }
                    continue;
                }
                Word::Corrupt => {
                    runtimes.corrupt += 1;
                    continue;
                }
            };
            frames.push(self.native_frame(s, info, ip, i, unnamed));
        }
        (frames, py)
    }

    /// The native (or file-relative) frame of word `ip` at `depth`; an unnamed one adds its binary
    /// and the reason to `unnamed`.
    fn native_frame<'a>(
        &self,
        s: &RawSample,
        info: Option<&'a ProcessInfo>,
        ip: u64,
        i: usize,
        unnamed: &mut Vec<(Cow<'a, str>, Reason)>,
    ) -> Frame {
        {
            if let Some(frame) = unpack_file_frame(ip) {
                return self.file_frame(frame, i, unnamed);
            }
            let addr = user_lookup_address(ip, i);
            let mapping = info.and_then(|p| p.mapping_for(addr));
            let symbols = match mapping {
                Some(m) => match &m.binary {
                    Some(b) => self.cache.user(b.id, file_offset(&m.module, addr)),
                    None => self
                        .perf_maps
                        .lookup(s.key.tgid, addr)
                        .unwrap_or_else(empty),
                },
                None => empty(),
            };
            if symbols.is_empty() {
                unnamed.push(match mapping {
                    Some(m) => (Cow::Borrowed(m.module.path.as_str()), self.reason(m)),
                    None if info.is_none() => (Cow::Borrowed(UNMAPPED), Reason::ProcessGone),
                    None => (Cow::Borrowed(UNMAPPED), Reason::OutsideMappings),
                });
            }
            Frame {
                address: ip & !FRAME_EXACT,
                kind: FrameKind::User,
                module: mapping.map(|m| m.module.clone()),
                symbols,
            }
        }
    }

    /// A file-relative frame at `depth`: named from its binary, whatever became of the process.
    fn file_frame(
        &self,
        frame: sonde_abi::unwind::FileFrame,
        depth: usize,
        unnamed: &mut Vec<(Cow<'_, str>, Reason)>,
    ) -> Frame {
        let Some(file) = self.files.get(frame.file_id) else {
            unnamed.push((Cow::Borrowed(UNMAPPED), Reason::UnknownFile));
            return Frame {
                address: frame.addr,
                kind: FrameKind::User,
                module: None,
                symbols: empty(),
            };
        };
        let offset = file.file_offset(frame.addr);
        let symbols = self.cache.user(
            file.binary.id,
            file_lookup_offset(offset, frame.exact, depth),
        );
        if symbols.is_empty() {
            unnamed.push((
                Cow::Owned(file.binary.path.clone()),
                match self.sources.get(file.binary.id) {
                    Some(Resolved::Missing(reason)) => *reason,
                    _ => Reason::NoSymbols,
                },
            ));
        }
        Frame {
            address: offset,
            kind: FrameKind::User,
            module: Some(file.module.clone()),
            symbols,
        }
    }

    /// The file-relative frames of a stored stack with the file offset each is looked up at.
    pub(super) fn file_frames(&self, ips: &[u64]) -> Vec<(FileEntry, u64)> {
        native_words(ips)
            .filter_map(|(depth, ip)| {
                let frame = unpack_file_frame(ip)?;
                let file = self.files.get(frame.file_id)?;
                let offset = file_lookup_offset(file.file_offset(frame.addr), frame.exact, depth);
                Some((file, offset))
            })
            .collect()
    }

    /// Why a frame in `mapping` has no name.
    fn reason(&self, mapping: &crate::process::Mapping) -> Reason {
        match &mapping.binary {
            None if mapping.module.path == JIT_PATH => Reason::NoPerfMap,
            None => Reason::Unreadable,
            Some(b) => match self.sources.get(b.id) {
                Some(Resolved::Missing(reason)) => *reason,
                _ => Reason::NoSymbols,
            },
        }
    }
}

/// Python frames of one stack, for the counters.
#[derive(Default)]
pub(super) struct PythonCounts {
    pub(super) frames: u64,
    pub(super) unreadable: u64,
    pub(super) dropped: u64,
}
