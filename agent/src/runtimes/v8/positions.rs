//! V8's source position tables and line ends: from a bytecode offset or a pc offset to a source
//! position (a script offset and, in optimized code, the inlined function it belongs to), and from a
//! script offset to a line.
//!
//! A position table (`source-position-table.cc`) is a sequence of (code offset, source position)
//! pairs, each a zigzag VLQ delta from the previous one; a negative code delta marks a position that
//! is not a statement (its offset is `-(delta + 1)`). The entry in effect at an offset is the last one
//! at or before it.

/// A `SourcePosition` (`source-position.h`): bit 0 says external (never in JavaScript), then a
/// 30-bit script offset plus one (0: unknown), then a 16-bit inlining id (0: the code's own function,
/// n: its n-th inlined call).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct SourcePosition(pub(crate) u64);

impl SourcePosition {
    /// The offset in the script, if known.
    pub(crate) fn script_offset(self) -> Option<u32> {
        if self.0 & 1 == 1 {
            return None;
        }
        let plus_one = ((self.0 >> 1) & ((1 << 30) - 1)) as u32;
        plus_one.checked_sub(1)
    }

    /// The inlined call this position is in (1-based), or 0.
    pub(crate) fn inlining_id(self) -> u16 {
        (self.0 >> 31) as u16
    }
}

/// Reads one unsigned VLQ at `*at`.
fn uvlq(table: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *table.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Reads one zigzag-signed VLQ at `*at`.
fn vlq(table: &[u8], at: &mut usize) -> Option<i64> {
    let v = uvlq(table, at)?;
    Some(((v >> 1) as i64) ^ -((v & 1) as i64))
}

/// The source position in effect at code or bytecode offset `offset`; None for an empty or
/// malformed table.
pub(crate) fn position_at(table: &[u8], offset: u64) -> Option<SourcePosition> {
    let mut at = 0;
    let (mut code, mut source) = (-1i64, 0i64);
    let mut found = None;
    while at < table.len() {
        let delta = vlq(table, &mut at)?;
        code += if delta >= 0 { delta } else { -(delta + 1) };
        if code > offset as i64 {
            break;
        }
        source += vlq(table, &mut at)?;
        found = Some(SourcePosition(source as u64));
    }
    found
}

/// Offsets of the ends of a source's lines (each `\n`, or a lone `\r`), as V8's `Script::line_ends`.
pub(crate) fn line_ends(source: &[u8]) -> Vec<u32> {
    let mut ends = Vec::new();
    for (i, &c) in source.iter().enumerate() {
        if c == b'\n' || (c == b'\r' && source.get(i + 1) != Some(&b'\n')) {
            ends.push(i as u32);
        }
    }
    // The last line ends where the source does.
    ends.push(source.len() as u32);
    ends
}

/// The line (from 1) of script offset `offset`, given its line ends.
pub(crate) fn line_of(line_ends: &[u32], offset: u32) -> Option<u32> {
    let line = line_ends.partition_point(|&end| end < offset);
    (line < line_ends.len()).then_some(line as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes `v` as V8 does: zigzag, then 7 bits a byte, low first.
    fn push_vlq(out: &mut Vec<u8>, v: i64) {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let byte = (u & 0x7f) as u8;
            u >>= 7;
            if u == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn positions_are_the_last_entry_at_or_before_the_offset() {
        // Entries at code offsets 0, 10 (not a statement) and 300: positions 5, 40 and 7000 + an
        // inlining id of 2.
        let inlined = 2u64 << 31 | (7001 << 1);
        let mut table = Vec::new();
        for (code_delta, source_delta) in [
            (1, 6 << 1),
            (-(10 + 1), ((41 << 1) - (6 << 1)) as i64),
            (290, inlined as i64 - (41 << 1)),
        ] {
            push_vlq(&mut table, code_delta);
            push_vlq(&mut table, source_delta);
        }
        let at = |offset| position_at(&table, offset).unwrap();
        assert_eq!(at(0).script_offset(), Some(5));
        assert_eq!(at(9).script_offset(), Some(5));
        assert_eq!(at(10).script_offset(), Some(40));
        assert_eq!(at(299).inlining_id(), 0);
        assert_eq!(
            (at(300).script_offset(), at(300).inlining_id()),
            (Some(7000), 2)
        );
        assert_eq!(at(1 << 20).inlining_id(), 2);
        assert_eq!(position_at(&[], 3), None);
        assert_eq!(position_at(&[0x80], 3), None, "a cut VLQ is malformed");
    }

    #[test]
    fn lines_count_from_one_and_the_last_line_has_no_newline() {
        let ends = line_ends(b"a\nbc\r\nd\re");
        assert_eq!(ends, [1, 5, 7, 9]);
        assert_eq!(line_of(&ends, 0), Some(1));
        assert_eq!(line_of(&ends, 1), Some(1));
        assert_eq!(line_of(&ends, 2), Some(2));
        assert_eq!(line_of(&ends, 6), Some(3));
        assert_eq!(line_of(&ends, 8), Some(4));
        assert_eq!(line_of(&ends, 10), None);
    }
}
