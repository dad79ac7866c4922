//! A method's line number table as HotSpot keeps it (`CompressedLineNumberReadStream`): after the
//! bytecodes, a list of (bytecode index, line) pairs, each a delta from the previous one, ended by a
//! 0 byte. A pair whose deltas are small (bci < 32, line < 8) is one byte `bci << 3 | line`; any
//! other is 0xff then both deltas as signed UNSIGNED5 numbers (`unsigned5`).
//!
//! The pairs are not sorted: the line of a bci is the pair at that bci, else the last pair before it
//! (`Method::line_number_from_bci`).

use super::unsigned5::Stream;
use crate::runtimes::memory::ProcessMemory;

/// Pairs kept at most (one per source line of a method: 64 KiB of bytecode has fewer).
const MAX_PAIRS: usize = 1 << 16;
/// Bytes of a table read at most.
pub(crate) const MAX_TABLE_BYTES: usize = 256 << 10;

/// One method's (bci, line) pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LineTable {
    pairs: Vec<(i32, i32)>,
}

/// How decoding some bytes ended.
#[derive(Debug, PartialEq, Eq)]
enum Decoded {
    /// The whole table, ended by its 0 byte after this many bytes.
    Complete(LineTable, usize),
    /// The bytes end before the table does.
    Short,
    /// Not a table (an excluded byte, or more pairs than any method has).
    Corrupt,
}

impl LineTable {
    /// The line of bytecode index `bci`, as HotSpot answers it (None when no pair is at or before it,
    /// or the table gives no positive line).
    pub(crate) fn line(&self, bci: i32) -> Option<u32> {
        // SynchronizationEntryBCI (-1): the method's entry.
        let bci = if bci == -1 { 0 } else { bci };
        let mut best: Option<(i32, i32)> = None;
        for &(b, line) in &self.pairs {
            if b == bci {
                return u32::try_from(line).ok().filter(|&l| l > 0);
            }
            if b < bci && best.is_none_or(|(best_bci, _)| b >= best_bci) {
                best = Some((b, line));
            }
        }
        best.and_then(|(_, line)| u32::try_from(line).ok().filter(|&l| l > 0))
    }

    /// Pairs held.
    pub(crate) fn len(&self) -> usize {
        self.pairs.len()
    }

    /// The table at the start of `bytes`.
    fn decode(bytes: &[u8], excluded: u8) -> Decoded {
        let mut s = Stream::new(bytes, 0, excluded);
        let (mut bci, mut line) = (0i32, 0i32);
        let mut pairs = Vec::new();
        loop {
            let Some(next) = s.byte() else {
                return Decoded::Short;
            };
            match next {
                0 => return Decoded::Complete(Self { pairs }, s.position()),
                0xff => {
                    let (Some(db), Some(dl)) = (s.signed(), s.signed()) else {
                        // A cut number (the bytes end) or an excluded byte: tell them apart by
                        // whether more bytes would help.
                        return match s.position() >= bytes.len().saturating_sub(MAX_NUMBER) {
                            true => Decoded::Short,
                            false => Decoded::Corrupt,
                        };
                    };
                    bci = bci.wrapping_add(db);
                    line = line.wrapping_add(dl);
                }
                b => {
                    bci = bci.wrapping_add(i32::from(b >> 3));
                    line = line.wrapping_add(i32::from(b & 7));
                }
            }
            if pairs.len() == MAX_PAIRS {
                return Decoded::Corrupt;
            }
            pairs.push((bci, line));
        }
    }

    /// Reads the table at `addr` in the process: a page at a time (its length is only known once
    /// decoded), at most [`MAX_TABLE_BYTES`].
    pub(crate) fn read(mem: &ProcessMemory, addr: u64, excluded: u8) -> Result<Self, LineError> {
        const PAGE: u64 = 4096;
        let mut bytes = Vec::new();
        loop {
            let at = addr + bytes.len() as u64;
            // Up to the end of the page: the table may end right before unmapped memory.
            let want = (PAGE - at % PAGE).min((MAX_TABLE_BYTES - bytes.len()) as u64) as usize;
            let start = bytes.len();
            bytes.resize(start + want, 0);
            mem.read(at, &mut bytes[start..])
                .map_err(|source| LineError::Memory { addr: at, source })?;
            match Self::decode(&bytes, excluded) {
                Decoded::Complete(table, _) => return Ok(table),
                Decoded::Corrupt => return Err(LineError::Corrupt { addr }),
                Decoded::Short if bytes.len() >= MAX_TABLE_BYTES => {
                    return Err(LineError::Corrupt { addr });
                }
                Decoded::Short => {}
            }
        }
    }
}

/// Bytes of one UNSIGNED5 number at most, for telling a cut number from a bad one.
const MAX_NUMBER: usize = 5;

/// Why a line table could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    /// The memory could not be read.
    #[error("cannot read the line number table at {addr:#x}: {source}")]
    Memory {
        /// Where.
        addr: u64,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
    /// Not a line number table.
    #[error("the line number table at {addr:#x} does not decode (a stale or bad method?)")]
    Corrupt {
        /// Where.
        addr: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtimes::hotspot::unsigned5::tests::encode_signed;

    /// Encodes `pairs` as HotSpot's `CompressedLineNumberWriteStream::write_pair` does.
    fn encode(pairs: &[(i32, i32)], excluded: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut bci, mut line) = (0, 0);
        for &(b, l) in pairs {
            let (db, dl) = (b - bci, l - line);
            if (0..32).contains(&db) && (0..8).contains(&dl) {
                out.push(((db << 3) | dl) as u8);
            } else {
                out.push(0xff);
                encode_signed(db, excluded, &mut out);
                encode_signed(dl, excluded, &mut out);
            }
            (bci, line) = (b, l);
        }
        out.push(0);
        out
    }

    #[test]
    fn lines_of_bytecode_indexes_as_hotspot_gives_them() {
        // Unsorted, as javac may emit them (a loop's condition after its body).
        let pairs = [(0, 12), (4, 13), (30, 20), (9, 15), (2000, 400), (2004, 3)];
        for excluded in [0, 1] {
            let bytes = encode(&pairs, excluded);
            let Decoded::Complete(table, used) = LineTable::decode(&bytes, excluded) else {
                panic!("{bytes:?}");
            };
            assert_eq!(used, bytes.len());
            assert_eq!(table.len(), pairs.len());
            assert_eq!(table.line(0), Some(12));
            assert_eq!(table.line(-1), Some(12), "method entry");
            assert_eq!(table.line(3), Some(12));
            assert_eq!(table.line(4), Some(13));
            assert_eq!(table.line(8), Some(13));
            assert_eq!(
                table.line(10),
                Some(15),
                "the largest bci below, not the last pair"
            );
            assert_eq!(table.line(31), Some(20));
            assert_eq!(table.line(2001), Some(400));
            assert_eq!(table.line(2004), Some(3), "a line going back is fine");
            // Cut short: more bytes needed, not an error.
            assert_eq!(
                LineTable::decode(&bytes[..bytes.len() - 1], excluded),
                Decoded::Short
            );
        }
        assert_eq!(LineTable::default().line(0), None);
        // An excluded byte in a JDK 21 stream: not a table.
        assert_eq!(
            LineTable::decode(&[0xff, 0, 0, 5, 5, 5, 5, 5, 5, 5], 1),
            Decoded::Corrupt
        );
    }

    #[test]
    fn tables_are_read_a_page_at_a_time_and_bounded() {
        let mem = ProcessMemory::new(std::process::id());
        let pairs: Vec<(i32, i32)> = (0..3000).map(|i| (i * 40, i * 9 + 1)).collect();
        let bytes = encode(&pairs, 1);
        assert!(bytes.len() > 8192, "spans pages");
        let table = LineTable::read(&mem, bytes.as_ptr() as u64, 1).unwrap();
        assert_eq!(table.len(), 3000);
        assert_eq!(table.line(40 * 2999 + 5), Some(2999 * 9 + 1));
        // Without an end within the bound.
        let endless = vec![0x09u8; MAX_TABLE_BYTES + 4096];
        let err = LineTable::read(&mem, endless.as_ptr() as u64, 0).unwrap_err();
        assert!(matches!(err, LineError::Corrupt { .. }), "{err}");
        assert!(matches!(
            LineTable::read(&mem, 0x10, 0),
            Err(LineError::Memory { .. })
        ));
    }
}
