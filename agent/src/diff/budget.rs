//! What a pprof's tables will cost in memory once decoded, measured on the bytes before decoding them.
//!
//! Decoding multiplies: an empty string is 2 bytes on the wire and 24 in a `Vec<String>`, an empty
//! location 2 bytes and 56 in a `Vec<Location>`. A 261 KB gzip file of repeated empty string-table entries
//! expands to ~270 MB of protobuf, ~135 million strings, and 3.4 GB once decoded. So the entries of every
//! table the diff decodes are counted first, in one pass that allocates nothing, and the file is refused
//! when their decoded size would pass the limit. The samples are not decoded (they are streamed), so they
//! cost nothing here; the stacks they expand to take what the tables left of the limit ([`StackBudget`]).

use std::mem::size_of;

use super::wire::{field, varint};
use crate::profile::pprof::proto;

/// `Profile` fields the diff decodes (see `frames::Header`).
const SAMPLE_TYPE: u64 = 1;
const MAPPING: u64 = 3;
const LOCATION: u64 = 4;
const FUNCTION: u64 = 5;
const STRING_TABLE: u64 = 6;
/// `Location.line`.
const LOCATION_LINE: u64 = 4;
/// Length-delimited wire type: messages and strings.
const LEN: u64 = 2;
/// Memory a location costs beyond its decoded struct: its slot in the id lookup, and the interned
/// `<mapping>+0x<offset>` name an unsymbolized one gets (two copies in the interner), roughly.
const LOCATION_EXTRA: u64 = 160;
/// The same for a function: its id map entry and interned name (the name's bytes are in the string table).
const FUNCTION_EXTRA: u64 = 96;

/// Entries of the decoded tables, and the memory they take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct TableSizes {
    /// `sample_type` entries.
    pub sample_types: u64,
    /// `mapping` entries.
    pub mappings: u64,
    /// `location` entries.
    pub locations: u64,
    /// `Location.line` entries over all locations.
    pub lines: u64,
    /// `function` entries.
    pub functions: u64,
    /// `string_table` entries.
    pub strings: u64,
    /// Bytes of all strings.
    pub string_bytes: u64,
}

impl TableSizes {
    /// Counts the table entries of an encoded `Profile`.
    pub(super) fn scan(mut buf: &[u8]) -> Result<Self, String> {
        let mut sizes = TableSizes::default();
        while !buf.is_empty() {
            let key = varint(&mut buf)?;
            let (tag, wire_type) = (key >> 3, key & 7);
            let body = field(&mut buf, wire_type)?;
            let Some(body) = body.filter(|_| wire_type == LEN) else {
                continue;
            };
            match tag {
                SAMPLE_TYPE => sizes.sample_types += 1,
                MAPPING => sizes.mappings += 1,
                LOCATION => {
                    sizes.locations += 1;
                    sizes.lines += count_fields(body, LOCATION_LINE)?;
                }
                FUNCTION => sizes.functions += 1,
                STRING_TABLE => {
                    sizes.strings += 1;
                    sizes.string_bytes += body.len() as u64;
                }
                _ => {}
            }
        }
        Ok(sizes)
    }

    /// Bytes the decoded tables take (the vectors' elements and the strings' bytes), and the table that
    /// takes the most with its entries.
    pub(super) fn decoded_bytes(&self) -> (u64, &'static str, u64) {
        let tables = [
            (
                "sample types",
                self.sample_types,
                self.sample_types * size_of::<proto::ValueType>() as u64,
            ),
            (
                "mappings",
                self.mappings,
                self.mappings * size_of::<proto::Mapping>() as u64,
            ),
            (
                "locations",
                self.locations,
                self.locations * (size_of::<proto::Location>() as u64 + LOCATION_EXTRA)
                    + self.lines * size_of::<proto::Line>() as u64,
            ),
            (
                "functions",
                self.functions,
                self.functions * (size_of::<proto::Function>() as u64 + FUNCTION_EXTRA),
            ),
            (
                "string table",
                self.strings,
                self.strings * size_of::<String>() as u64 + self.string_bytes,
            ),
        ];
        let total = tables.iter().map(|t| t.2).sum();
        let (name, entries, _) = tables.into_iter().max_by_key(|t| t.2).expect("five tables");
        (total, name, entries)
    }
}

/// How many length-delimited fields `tag` a message holds.
fn count_fields(mut message: &[u8], tag: u64) -> Result<u64, String> {
    let mut n = 0;
    while !message.is_empty() {
        let key = varint(&mut message)?;
        field(&mut message, key & 7)?;
        n += u64::from(key >> 3 == tag && key & 7 == LEN);
    }
    Ok(n)
}

/// Memory taken by the distinct stacks of one input, expanded to function ids: a sample of a few bytes can
/// name thousands of locations, each inlining many functions.
#[derive(Debug)]
pub(super) struct StackBudget {
    budget: u64,
    left: u64,
}

impl StackBudget {
    /// Hash-map entry, boxed slice header and weight of one stored stack, roughly.
    const PER_STACK: u64 = 64;
    const PER_FRAME: u64 = size_of::<super::frames::FnId>() as u64;

    /// A budget of `bytes`.
    pub(super) fn new(bytes: u64) -> Self {
        Self {
            budget: bytes,
            left: bytes,
        }
    }

    /// Takes the memory of one more stack of `frames`; false when the budget is spent.
    pub(super) fn take(&mut self, frames: usize) -> bool {
        let cost = Self::stack_cost(frames);
        match self.left.checked_sub(cost) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }

    /// The frames one more stack may still have.
    pub(super) fn frames_left(&self) -> usize {
        (self.left.saturating_sub(Self::PER_STACK) / Self::PER_FRAME) as usize
    }

    /// Bytes spent so far plus those of one more stack of `frames`.
    pub(super) fn cost(&self, frames: usize) -> u64 {
        (self.budget - self.left).saturating_add(Self::stack_cost(frames))
    }

    fn stack_cost(frames: usize) -> u64 {
        (frames as u64)
            .saturating_mul(Self::PER_FRAME)
            .saturating_add(Self::PER_STACK)
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;

    #[test]
    fn counts_the_tables_of_a_profile() {
        let profile = proto::Profile {
            string_table: vec!["".into(), "main".into(), "libc.so".into()],
            location: vec![
                proto::Location {
                    id: 1,
                    line: vec![proto::Line::default(), proto::Line::default()],
                    ..Default::default()
                },
                proto::Location::default(),
            ],
            function: vec![proto::Function::default()],
            sample: vec![proto::Sample::default(); 3],
            ..Default::default()
        };
        let sizes = TableSizes::scan(&profile.encode_to_vec()).unwrap();
        assert_eq!(
            sizes,
            TableSizes {
                sample_types: 0,
                mappings: 0,
                locations: 2,
                lines: 2,
                functions: 1,
                strings: 3,
                string_bytes: 11,
            }
        );
        let (total, table, entries) = sizes.decoded_bytes();
        assert_eq!((table, entries), ("locations", 2));
        assert_eq!(
            total,
            2 * (size_of::<proto::Location>() as u64 + LOCATION_EXTRA)
                + 2 * size_of::<proto::Line>() as u64
                + size_of::<proto::Function>() as u64
                + FUNCTION_EXTRA
                + 3 * size_of::<String>() as u64
                + 11
        );
    }

    #[test]
    fn empty_strings_cost_twelve_times_their_encoding() {
        // The string-table bomb: each empty entry is 2 bytes (key 0x32, length 0).
        let bytes = [0x32u8, 0].repeat(1000);
        let sizes = TableSizes::scan(&bytes).unwrap();
        assert_eq!(sizes.strings, 1000);
        assert_eq!(
            sizes.decoded_bytes(),
            (1000 * size_of::<String>() as u64, "string table", 1000)
        );
    }

    #[test]
    fn truncated_tables_are_errors() {
        assert!(TableSizes::scan(&[0x32, 5, b'a']).is_err());
        assert!(TableSizes::scan(&[0x22, 2, 0x22, 9]).is_err());
    }

    #[test]
    fn stack_budget_runs_out() {
        let mut budget = StackBudget::new(100);
        assert!(budget.take(8));
        assert!(!budget.take(8));
        assert!(!StackBudget::new(10).take(usize::MAX));
    }
}
