//! Frames an interpreter's walker appends after the native frames of a [`crate::UserStack`], one word
//! each, leaf to root: CRuby's (`crate::ruby`) and PHP's (`crate::php`). Neither interpreter keeps its
//! frames on the native stack, so the kernel reads them from the interpreter's own frame list after
//! the native walk, and userspace puts each run of them in place of the interpreter loop's native
//! frame that ran it (CPython's words, older, are `crate::python`'s own).
//!
//! A word: tag | [`ENTRY`]? | position << 45 | object >> 3. The tag (bits 63-60) says which
//! interpreter; the object is what the frame runs (a Ruby instruction sequence body, a PHP function),
//! 8-byte aligned in a 48-bit address space; the position is where in it (a Ruby instruction index, a
//! PHP line). [`ENTRY`] marks the first (root-most) frame one call of the interpreter's loop ran.

/// CRuby's tag (0b0001): neither a native address (below 2^48, with at most `FRAME_EXACT`, bit 63,
/// set), a file-relative word (bits 63 and 62), a Python word (bit 62 alone), nor a runtime head or
/// data word (0b0010, 0b0011).
pub const RUBY: u64 = 0b0001 << 60;
/// PHP's tag (0b1001): bit 63 with bit 60, which no other word kind has (see [`RUBY`]).
pub const PHP: u64 = 0b1001 << 60;
/// On a word: the first (root-most) frame its call of the interpreter's loop ran.
pub const ENTRY: u64 = 1 << 59;
/// Bits of the object's address, stored shifted right by 3.
const OBJECT_BITS: u32 = 45;
/// Largest position stored; larger ones are clamped.
pub const POSITION_MAX: u64 = (1 << 14) - 1;
/// The tag bits.
const TAG_MASK: u64 = 0xf << 60;

/// Stores one frame of the interpreter tagged `tag`.
#[inline(always)]
pub const fn pack(tag: u64, object: u64, position: u64, entry: bool) -> u64 {
    let position = if position > POSITION_MAX {
        POSITION_MAX
    } else {
        position
    };
    let entry = if entry { ENTRY } else { 0 };
    tag | entry | position << OBJECT_BITS | (object >> 3 & ((1 << OBJECT_BITS) - 1))
}

/// An appended frame, unpacked.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Appended {
    /// Address of what the frame runs, in the process.
    pub object: u64,
    /// Where in it.
    pub position: u32,
    /// The first frame of its call of the interpreter's loop.
    pub entry: bool,
}

/// The frame of the interpreter tagged `tag` stored in `word`, or None for any other word.
pub const fn unpack(tag: u64, word: u64) -> Option<Appended> {
    if word & TAG_MASK != tag {
        return None;
    }
    Some(Appended {
        object: (word & ((1 << OBJECT_BITS) - 1)) << 3,
        position: ((word >> OBJECT_BITS) & POSITION_MAX) as u32,
        entry: word & ENTRY != 0,
    })
}

/// Whether `word` is an appended frame of any interpreter.
pub const fn is_appended(word: u64) -> bool {
    unpack(RUBY, word).is_some() || unpack(PHP, word).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_are_no_other_word() {
        for (tag, other) in [(RUBY, PHP), (PHP, RUBY)] {
            for object in [0x5561_dbf5_7cb0, 0xffff_b9a4_4010] {
                let f = unpack(tag, pack(tag, object, 23, true)).unwrap();
                let expected = Appended {
                    object,
                    position: 23,
                    entry: true,
                };
                assert_eq!(f, expected);
                let word = pack(tag, object, 1 << 20, false);
                assert_eq!(unpack(tag, word).unwrap().position as u64, POSITION_MAX);
                assert!(unpack(other, word).is_none());
                assert!(crate::python::unpack_frame(word).is_none());
                assert!(crate::unwind::unpack_file_frame(word).is_none());
                assert!(!crate::runtime_frame::is_runtime_word(word));
            }
            assert_eq!(unpack(tag, 0x7fff_0000_1234), None);
            assert_eq!(
                unpack(tag, crate::unwind::FRAME_EXACT | 0x7fff_0000_1234),
                None
            );
            let python = crate::python::pack_frame(0x7f00_0000_1000, 3, true);
            assert_eq!(unpack(tag, python), None);
            let [head, data] = crate::runtime_frame::pack(3, 0x1000, true, 5, 7);
            assert_eq!((unpack(tag, head), unpack(tag, data)), (None, None));
        }
    }
}
