//! How the words of a stored user stack read (`sonde_abi`): native addresses (the kernel marks exact
//! instruction addresses), file-relative frames, words a runtime's walker appended after the native
//! frames (CPython's, merged by that runtime) and runtime frames (two words each, a head and a data
//! word, in place among the native frames: `sonde_abi::runtime_frame`, of any runtime). Neither
//! appended nor runtime words are addresses: every per-address path goes through [`in_place`] or
//! [`native_words`] (which gives the pc of a runtime frame the kernel stored with a pc, so it is
//! named as native code).

use sonde_abi::{
    runtime_frame::{self, RuntimeFrame},
    unwind::FRAME_EXACT,
};

/// One frame of a stored user stack, in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// A native address or a file-relative frame.
    Native(u64),
    /// A runtime frame (its head and data words), of any runtime.
    Runtime(RuntimeFrame),
    /// A runtime word that does not pair up: a head without its data word, or a data word alone.
    Corrupt,
}

/// The frames of `ips` in order, each with the depth of its (first) word; Python words left out.
pub(crate) fn in_place(ips: &[u64]) -> impl Iterator<Item = (usize, Word)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        loop {
            let depth = i;
            let word = *ips.get(i)?;
            i += 1;
            if runtime_frame::is_appended(word) {
                continue;
            }
            if runtime_frame::is_head(word) {
                let frame = ips
                    .get(i)
                    .and_then(|&data| runtime_frame::unpack(word, data));
                if frame.is_some() {
                    i += 1;
                }
                return Some((depth, frame.map_or(Word::Corrupt, Word::Runtime)));
            }
            if runtime_frame::is_data(word) {
                return Some((depth, Word::Corrupt));
            }
            return Some((depth, Word::Native(word)));
        }
    })
}

/// The native (and file-relative) words of a stored user stack with their depth, and the pcs of V8
/// frames stored with their code address ([`marker_ip`]).
pub(crate) fn native_words(ips: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    in_place(ips).filter_map(|(depth, w)| match w {
        Word::Native(ip) => Some((depth, ip)),
        Word::Runtime(f) => Some((depth, marker_ip(f)?)),
        Word::Corrupt => None,
    })
}

/// The runtime frames of a stored user stack.
pub(crate) fn runtime_frames(ips: &[u64]) -> impl Iterator<Item = RuntimeFrame> + '_ {
    in_place(ips).filter_map(|(_, w)| match w {
        Word::Runtime(f) => Some(f),
        Word::Native(_) | Word::Corrupt => None,
    })
}

/// The native word of a runtime frame the kernel stored with a pc
/// (`runtime_frame::holds_native_pc`: V8's builtins and stubs), named as native code; None for every
/// other runtime frame.
pub(crate) fn marker_ip(frame: RuntimeFrame) -> Option<u64> {
    runtime_frame::holds_native_pc(frame.kind)
        .then_some(frame.address | if frame.exact { FRAME_EXACT } else { 0 })
}

#[cfg(test)]
mod tests {
    use sonde_abi::{
        hotspot::{self, kind, pack_frame},
        python, v8,
    };

    use super::*;

    #[test]
    fn runtime_frames_are_in_place_and_never_addresses() {
        let [head, data] = pack_frame(kind::COMPILED, 0x7f00_1000, false, 0x40, 17);
        let [ihead, idata] = pack_frame(kind::INTERPRETED, 0x7f00_2000, true, 3, 5);
        let py = python::pack_frame(0x7f00_3000, 1, true);
        let ips = [
            ihead, idata, 0x5000, head, data, data, 0x6000, head, 0x7000, py, head,
        ];
        let words: Vec<(usize, Word)> = in_place(&ips).collect();
        let java = |h, d| Word::Runtime(hotspot::unpack_frame(h, d).unwrap());
        assert_eq!(
            words,
            [
                (0, java(ihead, idata)),
                (2, Word::Native(0x5000)),
                (3, java(head, data)),
                // A data word alone, then a head followed by no data word: both corrupt.
                (5, Word::Corrupt),
                (6, Word::Native(0x6000)),
                (7, Word::Corrupt),
                (8, Word::Native(0x7000)),
                // The Python word is left out; a head at the very end is corrupt.
                (10, Word::Corrupt),
            ]
        );
        let native: Vec<(usize, u64)> = native_words(&ips).collect();
        assert_eq!(native, [(2, 0x5000), (6, 0x6000), (8, 0x7000)]);
        assert_eq!(runtime_frames(&ips).count(), 2);
        assert_eq!(in_place(&[]).count(), 0);
        // A V8 builtin's frame is also its pc, named as native code; other V8 frames are not.
        let [mhead, mdata] = runtime_frame::pack(v8::kind::MARKER, 0x7f00_4000, true, 3, 0);
        let [fhead, fdata] = runtime_frame::pack(v8::kind::FUNCTION, 0x7f00_5000, false, 0, 9);
        let ips = [mhead, mdata, fhead, fdata, 0x8000];
        let native: Vec<(usize, u64)> = native_words(&ips).collect();
        assert_eq!(native, [(0, 0x7f00_4000 | FRAME_EXACT), (4, 0x8000)]);
    }
}
