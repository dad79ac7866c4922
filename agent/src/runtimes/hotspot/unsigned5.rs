//! HotSpot's compressed streams (`CompressedReadStream`): the line number tables of methods and the
//! debug information of compiled code are written as UNSIGNED5 numbers, the J2SE Pack200 encoding: 1
//! to 5 bytes, the low bytes (below 192) ending a number, each high byte carrying 6 more bits.
//!
//! From JDK 20 (build 15) HotSpot's `UNSIGNED5` excludes the byte 0 so a stream can be NUL-ended:
//! every byte is stored one higher ([`Stream::new`]'s `excluded`, from `layout`). The threshold in
//! stored bytes stays 192 in both.

/// Bytes of one number at most.
const MAX_LENGTH: usize = 5;
/// Stored bytes from here on are "high": the number goes on.
const HIGH: u32 = 192;
/// Bits each byte after the first adds.
const LG_H: u32 = 6;

/// A compressed stream over bytes read from the process.
#[derive(Clone, Debug)]
pub(crate) struct Stream<'a> {
    bytes: &'a [u8],
    pos: usize,
    excluded: u8,
}

impl<'a> Stream<'a> {
    /// A stream over `bytes` from `pos`, whose encoding excludes the bytes below `excluded` (0 or 1).
    pub(crate) fn new(bytes: &'a [u8], pos: usize, excluded: u8) -> Self {
        Self {
            bytes,
            pos,
            excluded,
        }
    }

    /// Where the next read starts.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// One raw byte (line tables mix them with numbers); None at the end.
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// One UNSIGNED5 number; None at the end of the bytes or at an excluded byte (not a stream).
    pub(crate) fn uint(&mut self) -> Option<u32> {
        let x = u32::from(self.excluded);
        let mut sum = 0u32;
        let mut shift = 0;
        for i in 0..MAX_LENGTH {
            let b = u32::from(*self.bytes.get(self.pos + i)?);
            let digit = b.checked_sub(x)?;
            sum = sum.wrapping_add(digit.wrapping_shl(shift));
            if b < HIGH || i == MAX_LENGTH - 1 {
                self.pos += i + 1;
                return Some(sum);
            }
            shift += LG_H;
        }
        unreachable!("the last byte always ends a number")
    }

    /// `read_int`: the same bits as an int.
    pub(crate) fn int(&mut self) -> Option<i32> {
        self.uint().map(|u| u as i32)
    }

    /// `read_signed_int`: zigzag-decoded.
    pub(crate) fn signed(&mut self) -> Option<i32> {
        let u = self.uint()?;
        Some((u >> 1) as i32 ^ -((u & 1) as i32))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes `v` as HotSpot's `write_int` does (for tests of the readers).
    pub(crate) fn encode(v: u32, excluded: u8, out: &mut Vec<u8>) {
        let x = u32::from(excluded);
        let l = HIGH - x;
        let mut sum = v;
        for i in 0..MAX_LENGTH {
            if sum < l || i == MAX_LENGTH - 1 {
                out.push((sum + x) as u8);
                return;
            }
            sum -= l;
            out.push((l + (sum & 63) + x) as u8);
            sum >>= LG_H;
        }
    }

    pub(crate) fn encode_signed(v: i32, excluded: u8, out: &mut Vec<u8>) {
        encode(((v << 1) ^ (v >> 31)) as u32, excluded, out);
    }

    #[test]
    fn numbers_round_trip_in_both_encodings() {
        for excluded in [0, 1] {
            let values = [
                0,
                1,
                190,
                191,
                192,
                193,
                4095,
                12_345,
                1 << 20,
                u32::MAX >> 1,
                u32::MAX,
            ];
            let mut bytes = Vec::new();
            for v in values {
                encode(v, excluded, &mut bytes);
            }
            let mut s = Stream::new(&bytes, 0, excluded);
            for v in values {
                assert_eq!(s.uint(), Some(v), "{v} (excluded {excluded})");
            }
            assert_eq!(s.uint(), None, "the end");
            assert_eq!(s.position(), bytes.len());
            if excluded == 1 {
                assert!(!bytes.contains(&0), "no NUL in a JDK 21 stream");
            }
        }
        // Small numbers are one byte: 191 in the old encoding, 190 in the new one.
        let mut one = Vec::new();
        encode(191, 0, &mut one);
        assert_eq!(one, [191]);
        one.clear();
        encode(191, 1, &mut one);
        assert_eq!(one.len(), 2);
        let mut bytes = Vec::new();
        for v in [0, -1, 1, -300, 300, i32::MIN, i32::MAX] {
            encode_signed(v, 1, &mut bytes);
        }
        let mut s = Stream::new(&bytes, 0, 1);
        for v in [0, -1, 1, -300, 300, i32::MIN, i32::MAX] {
            assert_eq!(s.signed(), Some(v));
        }
        // An excluded byte is no stream; a number cut by the end is none either.
        assert_eq!(Stream::new(&[0], 0, 1).uint(), None);
        assert_eq!(Stream::new(&[200, 250], 0, 0).uint(), None);
    }
}
