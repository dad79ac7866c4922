//! An instruction sequence's body read from the process: its label (`alpha`, `block in beta`,
//! `<main>`), its file, and its line table, from which the line of each instruction index the kernel
//! stored is found as Ruby's own backtraces find it (`rb_vm_get_sourceline`).
//!
//! The line table maps instruction positions to `insns_info` entries. While an iseq is being built
//! it is a sorted array of positions; once built (`rb_iseq_insns_info_encode_positions`, the default
//! `VM_INSN_INFO_TABLE_IMPL` 2) it is a succinct bit vector with a set bit at each entry's position,
//! and an entry's index is the rank of the position: the count of set bits up to it.

use super::{
    offsets::{BODY_LOCATION, BODY_SIZE, ISEQ_BODY, Layout},
    strings,
};
use crate::runtimes::memory::ProcessMemory;

/// `enum iseq_type` (`vm_core.h`, the same from 2.3 to 3.4), in the body's first word.
const TYPE_METHOD: u32 = 1;
const TYPE_BLOCK: u32 = 2;

/// Entries read of one line table at most (an iseq of a 64 Ki-line generated file).
const MAX_ENTRIES: u64 = 1 << 16;
/// `IMMEDIATE_TABLE_SIZE`: positions below it are ranked from the table's first words.
const IMMEDIATE: u64 = 54;
/// Bytes of the immediate part (`uint64_t imm_part[IMMEDIATE / 9]`).
const IMMEDIATE_BYTES: u64 = IMMEDIATE / 9 * 8;
/// A `succ_dict_block`: `rank` (u32, padded), `small_block_ranks` (u64), `bits[8]` (512 bits).
const BLOCK_BYTES: u64 = 80;

/// What an instruction sequence's frames are named from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Iseq {
    pub(crate) label: String,
    pub(crate) file: String,
    /// The line it starts at: its frames' line when the table cannot say.
    pub(crate) first_line: u32,
    lines: Lines,
    /// The method it is or runs in, whose class names its frames (`super::owner`).
    pub(crate) method: Option<MethodOf>,
}

/// The method an iseq is (a `def`) or runs in (a block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MethodOf {
    /// The method's body.
    pub(crate) body: u64,
    /// What comes before the method's name: `block in `, `block (2 levels) in `, nothing.
    pub(crate) prefix: String,
    /// The method's name.
    pub(crate) name: String,
}

impl MethodOf {
    /// The method `body`, labelled `label`, is or runs in, when it is a method or a block.
    fn read(memory: &ProcessMemory, layout: &Layout, body: u64, label: &str) -> Option<Self> {
        match memory.u64(body).ok()? as u32 {
            TYPE_METHOD => Some(Self {
                body,
                prefix: String::new(),
                name: label.to_string(),
            }),
            TYPE_BLOCK => {
                let local = memory.u64(body + u64::from(layout.local_iseq)).ok()?;
                let method = memory.u64(local + u64::from(ISEQ_BODY)).ok()?;
                // A block in a class body or at the top level runs in no method.
                if memory.u64(method).ok()? as u32 != TYPE_METHOD {
                    return None;
                }
                let at = label.rfind(" in ")? + 4;
                Some(Self {
                    body: method,
                    prefix: label[..at].to_string(),
                    name: label[at..].to_string(),
                })
            }
            _ => None,
        }
    }
}

/// How an iseq's instruction positions map to its line numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Lines {
    /// One entry for the whole sequence, or none read.
    One(Option<u32>),
    /// Entries' positions, sorted, and their lines.
    Positions(Vec<u32>, Vec<u32>),
    /// The succinct bit vector's bytes and the entries' lines.
    Succinct(Vec<u8>, Vec<u32>),
}

impl Iseq {
    /// Reads the body at `body`; None when its label or file cannot be read (freed, or not a body).
    pub(crate) fn read(memory: &ProcessMemory, layout: &Layout, body: u64) -> Option<Self> {
        let mut location = [0u8; 32];
        memory.read(body + BODY_LOCATION, &mut location).ok()?;
        let word = |i: usize| u64::from_le_bytes(location[i * 8..i * 8 + 8].try_into().unwrap());
        let (pathobj, label, first) = (word(0), word(2), word(3));
        let label = strings::string(memory, layout, label)?;
        let file = strings::path(memory, layout, pathobj)?;
        let first_line = match layout.first_lineno_fixnum {
            true => (first >> 1) as u32,
            false => first as u32,
        };
        let lines = read_lines(memory, layout, body).unwrap_or(Lines::One(None));
        let method = MethodOf::read(memory, layout, body, &label);
        Some(Self {
            label,
            file,
            first_line,
            lines,
            method,
        })
    }

    /// The line of the instruction whose pc is at `position`; the pc points past the instruction
    /// running (a call's return), so the instruction is the one before it.
    pub(crate) fn line(&self, position: u32) -> u32 {
        let pos = position.saturating_sub(1);
        let found = match &self.lines {
            Lines::One(line) => *line,
            Lines::Positions(positions, lines) => {
                let index = positions.partition_point(|&p| p <= pos);
                index.checked_sub(1).and_then(|i| lines.get(i).copied())
            }
            Lines::Succinct(table, lines) => rank(table, u64::from(pos))
                .and_then(|r| r.checked_sub(1))
                .and_then(|i| lines.get(i as usize).copied()),
        };
        found.filter(|&l| l > 0).unwrap_or(self.first_line)
    }
}

fn read_lines(memory: &ProcessMemory, layout: &Layout, body: u64) -> Option<Lines> {
    let u32_at = |at: u64| -> Option<u32> {
        let mut b = [0; 4];
        memory.read(at, &mut b).ok()?;
        Some(u32::from_le_bytes(b))
    };
    let entries = memory.u64(body + u64::from(layout.insns_body)).ok()?;
    let count = u64::from(u32_at(body + u64::from(layout.insns_size))?);
    if entries == 0 || count == 0 || count > MAX_ENTRIES {
        return None;
    }
    let stride = u64::from(layout.insn_info_size);
    let mut raw = vec![0u8; (count * stride) as usize];
    memory.read(entries, &mut raw).ok()?;
    let lines: Vec<u32> = raw
        .chunks_exact(stride as usize)
        .map(|e| u32::from_le_bytes(e[..4].try_into().unwrap()))
        .collect();
    if count == 1 {
        return Some(Lines::One(lines.first().copied()));
    }
    let positions = memory.u64(body + u64::from(layout.insns_positions)).ok()?;
    if positions != 0 {
        let mut raw = vec![0u8; (count * 4) as usize];
        memory.read(positions, &mut raw).ok()?;
        let positions = raw
            .chunks_exact(4)
            .map(|p| u32::from_le_bytes(p.try_into().unwrap()))
            .collect();
        return Some(Lines::Positions(positions, lines));
    }
    let table = memory.u64(body + u64::from(layout.succ_index_table)).ok()?;
    let size = u64::from(u32_at(body + BODY_SIZE)?);
    if table == 0 || size == 0 {
        return None;
    }
    let blocks = size.saturating_sub(IMMEDIATE).div_ceil(512);
    let mut bytes = vec![0u8; (IMMEDIATE_BYTES + blocks * BLOCK_BYTES) as usize];
    memory.read(table, &mut bytes).ok()?;
    Some(Lines::Succinct(bytes, lines))
}

/// `succ_index_lookup`: the number of set bits at or below `x` in the succinct table `table`.
fn rank(table: &[u8], x: u64) -> Option<u64> {
    let word = |at: u64| -> Option<u64> {
        let at = at as usize;
        Some(u64::from_le_bytes(table.get(at..at + 8)?.try_into().ok()?))
    };
    if x < IMMEDIATE {
        let (i, j) = (x / 9, x % 9);
        return Some((word(i * 8)? >> (j * 7)) & 0x7f);
    }
    let x = x - IMMEDIATE;
    let block = IMMEDIATE_BYTES + (x / 512) * BLOCK_BYTES;
    let bit = x % 512;
    let small = bit / 64;
    let block_rank = word(block)? & 0xffff_ffff;
    let small_ranks = word(block + 8)?;
    let small_rank = match small {
        0 => 0,
        i => (small_ranks >> ((i - 1) * 9)) & 0x1ff,
    };
    let bits = word(block + 16 + small * 8)?;
    let popcount = u64::from((bits << (63 - bit % 64)).count_ones());
    Some(block_rank + small_rank + popcount)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table built as `succ_index_table_create` builds one, over set positions `set`.
    fn table(set: &[u64], size: u64) -> Vec<u8> {
        let blocks = size.saturating_sub(IMMEDIATE).div_ceil(512);
        let mut t = vec![0u8; (IMMEDIATE_BYTES + blocks * BLOCK_BYTES) as usize];
        let ranked = |x: u64| set.iter().filter(|&&p| p <= x).count() as u64;
        for x in 0..IMMEDIATE.min(size) {
            let (i, j) = ((x / 9) as usize, x % 9);
            let mut w = u64::from_le_bytes(t[i * 8..i * 8 + 8].try_into().unwrap());
            w |= ranked(x) << (j * 7);
            t[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        for b in 0..blocks {
            let at = (IMMEDIATE_BYTES + b * BLOCK_BYTES) as usize;
            let start = IMMEDIATE + b * 512;
            let rank = set.iter().filter(|&&p| p < start).count() as u64;
            t[at..at + 4].copy_from_slice(&(rank as u32).to_le_bytes());
            let mut small = 0u64;
            for s in 0..8u64 {
                let lo = start + s * 64;
                if s > 0 {
                    let r = set.iter().filter(|&&p| p >= start && p < lo).count() as u64;
                    small |= r << ((s - 1) * 9);
                }
                let mut bits = 0u64;
                for &p in set.iter().filter(|&&p| p >= lo && p < lo + 64) {
                    bits |= 1 << (p - lo);
                }
                let w = at + 16 + (s as usize) * 8;
                t[w..w + 8].copy_from_slice(&bits.to_le_bytes());
            }
            t[at + 8..at + 16].copy_from_slice(&small.to_le_bytes());
        }
        t
    }

    #[test]
    fn the_rank_of_a_position_counts_the_entries_up_to_it() {
        let set = [0, 3, 7, 53, 54, 60, 200, 565, 566, 1500];
        let size = 1600;
        let t = table(&set, size);
        for x in 0..size {
            let want = set.iter().filter(|&&p| p <= x).count() as u64;
            assert_eq!(rank(&t, x), Some(want), "position {x}");
        }
        assert_eq!(rank(&t[..8], 1000), None);
    }

    #[test]
    fn lines_come_from_the_instruction_before_the_pc() {
        let iseq = |lines| Iseq {
            label: "alpha".into(),
            file: "spin.rb".into(),
            first_line: 1,
            lines,
            method: None,
        };
        let sorted = iseq(Lines::Positions(vec![0, 4, 9], vec![2, 3, 5]));
        assert_eq!(
            [0, 1, 4, 5, 9, 10, 40].map(|p| sorted.line(p)),
            [2, 2, 2, 3, 3, 5, 5]
        );
        let succinct = iseq(Lines::Succinct(table(&[0, 4, 9], 12), vec![2, 3, 5]));
        assert_eq!([1, 5, 10].map(|p| succinct.line(p)), [2, 3, 5]);
        // A table that says nothing: the iseq's first line.
        assert_eq!(iseq(Lines::One(None)).line(7), 1);
    }
}
