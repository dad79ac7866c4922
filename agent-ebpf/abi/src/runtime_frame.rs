//! Frames of language runtimes that the kernel walks in place, interleaved with native frames (HotSpot
//! and V8 JIT code, interpreters whose frames live on the native stack): each is two self-describing
//! words in a [`crate::UserStack`], whatever the runtime.
//! - the head, [`HEAD`] | kind << [`KIND_SHIFT`] | [`EXACT`]? | address: the object the frame runs
//!   (a method, compiled code, a function), its [`kind`] saying which runtime and what the object is;
//! - the data, [`DATA`] | position << 32 | check: where in the object (a bytecode offset, a pc offset)
//!   and a value userspace reads again to tell a live object from a freed and reused one.
//!
//! Neither word can be taken for another kind of frame: native addresses are below 2^48 (bits 48-62
//! clear), Python frames have bit 62, file-relative frames bits 62 and 63.

/// Marks the head word of a runtime frame (bits 63-60 are 0b0010).
pub const HEAD: u64 = 1 << 61;
/// Marks the data word that follows every head (bits 63-60 are 0b0011).
pub const DATA: u64 = 3 << 60;
/// The bits that tell a head, a data word and anything else apart.
const TAG_MASK: u64 = 0xf << 60;
/// Bit position of the [`kind`] in a head (4 bits).
pub const KIND_SHIFT: u32 = 56;
/// On a head: the pc was the interrupted instruction (the leaf, or the frame a signal interrupted),
/// not a return address.
pub const EXACT: u64 = 1 << 55;
/// The address bits of a head: 48-bit user addresses (x86_64's and AArch64's).
pub const ADDRESS_MASK: u64 = (1 << 48) - 1;
/// The position bits of a data word (after shifting right by 32).
pub const POSITION_MASK: u64 = (1 << 24) - 1;

/// Which runtime a frame is of, and what its head's address is: each runtime has a range of kinds.
pub mod kind {
    /// HotSpot's kinds are `FIRST_HOTSPOT..FIRST_V8` (see `crate::hotspot::kind`).
    pub const FIRST_HOTSPOT: u64 = 0;
    /// V8's kinds are `FIRST_V8..=LAST` (see `crate::v8::kind`).
    pub const FIRST_V8: u64 = 8;
    /// The largest kind a head holds.
    pub const LAST: u64 = 15;
    /// The one kind whose head holds a native pc rather than a runtime object: V8's markers
    /// (`crate::v8::kind::MARKER`, builtins and stubs).
    pub const NATIVE_PC: u64 = FIRST_V8;
}

/// The two words of one runtime frame.
#[inline(always)]
pub const fn pack(kind: u64, address: u64, exact: bool, position: u64, check: u32) -> [u64; 2] {
    let exact = if exact { EXACT } else { 0 };
    let position = if position > POSITION_MASK {
        POSITION_MASK
    } else {
        position
    };
    [
        HEAD | (kind & kind::LAST) << KIND_SHIFT | exact | (address & ADDRESS_MASK),
        DATA | position << 32 | check as u64,
    ]
}

/// A runtime frame, unpacked from its two words.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuntimeFrame {
    /// One of the runtimes' kinds (see [`kind`]).
    pub kind: u64,
    /// The object the frame runs.
    pub address: u64,
    /// The pc was an exact instruction address.
    pub exact: bool,
    /// Where in the object.
    pub position: u32,
    /// The validation value.
    pub check: u32,
}

/// Whether `word` is a runtime frame's head.
#[inline(always)]
pub const fn is_head(word: u64) -> bool {
    word & TAG_MASK == HEAD
}

/// Whether `word` is a runtime frame's data word.
#[inline(always)]
pub const fn is_data(word: u64) -> bool {
    word & TAG_MASK == DATA
}

/// Whether `word` is either word of a runtime frame.
#[inline(always)]
pub const fn is_runtime_word(word: u64) -> bool {
    is_head(word) || is_data(word)
}

/// Whether frames of `kind` hold a native pc in their head, to be named as native code where a file
/// holds it (V8's markers: builtins and stubs), rather than an object of the runtime.
#[inline(always)]
pub const fn holds_native_pc(kind: u64) -> bool {
    kind == kind::NATIVE_PC
}

/// Whether `word` is a frame a runtime's walker appended after the native frames (CPython's, CRuby's
/// and PHP's, merged in userspace), neither an address nor an in-place frame.
#[inline(always)]
pub const fn is_appended(word: u64) -> bool {
    crate::python::unpack_frame(word).is_some() || crate::appended::is_appended(word)
}

/// The runtime frame whose head is `head` and data `data`.
#[inline(always)]
pub const fn unpack(head: u64, data: u64) -> Option<RuntimeFrame> {
    if !is_head(head) || !is_data(data) {
        return None;
    }
    Some(RuntimeFrame {
        kind: (head >> KIND_SHIFT) & kind::LAST,
        address: head & ADDRESS_MASK,
        exact: head & EXACT != 0,
        position: ((data >> 32) & POSITION_MASK) as u32,
        check: data as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_are_never_other_words() {
        for kind in [kind::FIRST_HOTSPOT, 4, kind::FIRST_V8, kind::LAST] {
            let [head, data] = pack(kind, 0x7f12_3456_7890, true, 0x1234, 77);
            assert_eq!(
                unpack(head, data),
                Some(RuntimeFrame {
                    kind,
                    address: 0x7f12_3456_7890,
                    exact: true,
                    position: 0x1234,
                    check: 77
                })
            );
            for word in [head, data] {
                assert!(crate::python::unpack_frame(word).is_none());
                assert!(crate::unwind::unpack_file_frame(word).is_none());
            }
            assert!(!is_data(head) && !is_head(data));
        }
        assert!(!is_runtime_word(0x7fff_0000_1234));
        assert!(!is_runtime_word(
            crate::unwind::FRAME_EXACT | 0x7fff_0000_1234
        ));
        assert!(!is_runtime_word(crate::python::pack_frame(
            0x7f00_0000_1000,
            3,
            true
        )));
        let [head, _] = pack(1, 0x1000, false, 0, 0);
        let [_, clamped] = pack(1, 0x1000, false, 1 << 30, 0);
        assert_eq!(
            unpack(head, clamped).unwrap().position as u64,
            POSITION_MASK
        );
    }
}
