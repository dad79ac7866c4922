//! The user part of a stack: its words in place (`crate::runtimes::stack_words`): native frames named
//! through the process's mappings (binaries by blazesym or a runtime's table, JIT code by the perf
//! map), file-relative frames through their binary, runtime frames by the runtime owning their kind;
//! then the frames runtimes appended merged in where they ran. Every unnamed native frame is noted
//! with its binary and the reason.

use std::borrow::Cow;

use sonde_abi::unwind::{FRAME_EXACT, unpack_file_frame};

use super::{
    Reason, Symbolizer,
    debuginfo::Resolved,
    lookup::empty,
    marker,
    unmapped::UNMAPPED,
    words::{file_lookup_offset, file_offset, user_lookup_address},
};
use crate::{
    bpf::drain::{RawSample, RawStack},
    process::{JIT_PATH, ProcessInfo, file_ids::FileEntry},
    profile::{Frame, FrameKind},
    runtimes::{
        FrameTally, Runtime,
        stack_words::{Word, in_place, native_words},
    },
};

/// Each runtime's frames of one stack, for the counters, indexed by `Runtime as usize`.
pub(super) type Tallies = [FrameTally; Runtime::ALL.len()];

impl Symbolizer {
    /// The user frames of `s`, in place, with the frames runtimes appended merged in where they
    /// ran; each unnamed native frame adds its binary and the reason to `unnamed`.
    pub(super) fn push_user<'a>(
        &self,
        s: &RawSample,
        info: Option<&'a ProcessInfo>,
        frames: &mut Vec<Frame>,
        unnamed: &mut Vec<(Cow<'a, str>, Reason)>,
    ) -> Tallies {
        let mut tallies = Tallies::default();
        let RawStack::Frames(ips) = &s.user else {
            frames.extend(marker(&s.user, "user"));
            return tallies;
        };
        let mut native = self.in_place(s, ips, info, unnamed, &mut tallies);
        for namer in &self.runtimes {
            let tally = &mut tallies[namer.runtime() as usize];
            native = namer.merge(info, ips, native, tally);
        }
        frames.extend(native);
        tallies
    }

    /// The native and runtime frames of `ips` in place, each runtime frame named by the runtime
    /// that owns its kind.
    fn in_place<'a>(
        &self,
        s: &RawSample,
        ips: &[u64],
        info: Option<&'a ProcessInfo>,
        unnamed: &mut Vec<(Cow<'a, str>, Reason)>,
        tallies: &mut Tallies,
    ) -> Vec<Frame> {
        let mut frames = Vec::with_capacity(ips.len());
        for (i, word) in in_place(ips) {
            match word {
                Word::Native(ip) => frames.push(self.native_frame(s, info, ip, i, unnamed)),
                Word::Runtime(f) => {
                    let Some(namer) = self.runtimes.iter().find(|n| n.owns(f.kind)) else {
                        // A kind no runtime that is on owns: counted with the first that stores
                        // frames in place, as a stack stored wrongly.
                        self.count_corrupt(tallies);
                        continue;
                    };
                    let exact = if f.exact { FRAME_EXACT } else { 0 };
                    // Frames that hold a pc are named as native code, not noted as unnamed.
                    let native =
                        |addr: u64| self.native_frame(s, info, addr | exact, i, &mut Vec::new());
                    let tally = &mut tallies[namer.runtime() as usize];
                    match namer.frame(info, f, &native) {
                        Some((frame, outcome)) => {
                            tally.count(outcome);
                            frames.push(frame);
                        }
                        None => tally.dropped += 1,
                    }
                }
                Word::Corrupt => self.count_corrupt(tallies),
            }
        }
        frames
    }

    /// Counts a runtime word that does not pair up, with the first runtime (in registration
    /// order) that stores frames in place.
    fn count_corrupt(&self, tallies: &mut Tallies) {
        let owner = self
            .runtimes
            .iter()
            .find(|n| (0..=sonde_abi::runtime_frame::kind::LAST).any(|k| n.owns(k)));
        if let Some(owner) = owner {
            tallies[owner.runtime() as usize].corrupt += 1;
        }
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
                return_address: addr != ip & !FRAME_EXACT,
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
                return_address: false,
                module: None,
                symbols: empty(),
            };
        };
        let offset = file.file_offset(frame.addr);
        let at = file_lookup_offset(offset, frame.exact, depth);
        let symbols = self.cache.user(file.binary.id, at);
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
            return_address: at != offset,
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
