//! Streams the samples of an encoded pprof straight from the protobuf bytes, without building a message
//! per sample: a million-sample profile costs one pass over its bytes and no allocation per sample.
//!
//! A sample's location ids are handed over still packed (varint bytes), so a caller can recognise a
//! stack it has seen before by hashing those bytes, without decoding them again.

use prost::encoding::{decode_varint, encode_varint};

/// The parts of one `perftools.profiles.Sample` the diff needs.
#[derive(Debug)]
pub struct SampleView<'a> {
    /// `location_id` as packed varints, leaf first.
    pub locations: &'a [u8],
    /// `value`, one per sample type.
    pub values: &'a [i64],
    /// Carries the label `truncated` = `"1"`.
    pub truncated: bool,
    /// Carries the label [`LabelIndexes::only`] asks for (true when it asks for none).
    pub selected: bool,
}

/// String-table indices of the labels the diff looks for; `None` where the profile lacks the string.
#[derive(Clone, Copy, Debug, Default)]
pub struct LabelIndexes {
    /// `truncated` = `"1"`, which marks truncated stacks.
    pub truncated: (Option<i64>, Option<i64>),
    /// The one label a sample must carry to be read (`sonde diff --label KEY=VALUE`), if asked.
    pub only: Option<(Option<i64>, Option<i64>)>,
}

impl LabelIndexes {
    /// The indices of the strings of `wanted` in `strings`: `truncated` = `"1"`, and `only`.
    pub fn find(strings: &[String], only: Option<(&str, &str)>) -> Self {
        let at = |want: &str| strings.iter().position(|s| s == want).map(|i| i as i64);
        Self {
            truncated: (at("truncated"), at("1")),
            only: only.map(|(key, value)| (at(key), at(value))),
        }
    }
}

pub(super) fn varint(buf: &mut &[u8]) -> Result<u64, String> {
    decode_varint(buf).map_err(|e| e.to_string())
}

/// Splits `len` bytes off the front of `buf`.
fn take<'a>(buf: &mut &'a [u8], len: usize) -> Result<&'a [u8], String> {
    if len > buf.len() {
        return Err("truncated protobuf message".into());
    }
    let (head, rest) = buf.split_at(len);
    *buf = rest;
    Ok(head)
}

/// Skips a field of `wire_type`, or returns the bytes of a length-delimited one.
pub(super) fn field<'a>(buf: &mut &'a [u8], wire_type: u64) -> Result<Option<&'a [u8]>, String> {
    match wire_type {
        0 => varint(buf).map(|_| None),
        1 => take(buf, 8).map(|_| None),
        2 => {
            let len = varint(buf)? as usize;
            take(buf, len).map(Some)
        }
        5 => take(buf, 4).map(|_| None),
        other => Err(format!("unsupported protobuf wire type {other}")),
    }
}

/// Calls `f` for each `Profile.sample` (field 2) of the encoded profile; returns how many there were.
pub fn for_each_sample(
    mut buf: &[u8],
    labels: LabelIndexes,
    mut f: impl FnMut(&SampleView<'_>),
) -> Result<usize, String> {
    let (mut values, mut spliced) = (Vec::with_capacity(4), Vec::new());
    let mut count = 0;
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let Some(mut sample) = field(&mut buf, key & 7)? else {
            continue;
        };
        if key >> 3 != 2 {
            continue;
        }
        count += 1;
        values.clear();
        spliced.clear();
        // Location ids usually arrive as one packed run; other encodings are spliced into one.
        let mut packed: Option<&[u8]> = None;
        let mut is_spliced = false;
        let mut truncated = false;
        let mut selected = labels.only.is_none();
        while !sample.is_empty() {
            let key = varint(&mut sample)?;
            let (tag, wire_type) = (key >> 3, key & 7);
            match (tag, wire_type) {
                (1, 0) => {
                    let id = varint(&mut sample)?;
                    is_spliced = splice(&mut spliced, packed.take(), is_spliced);
                    encode_varint(id, &mut spliced);
                }
                (1, 2) => {
                    let len = varint(&mut sample)? as usize;
                    let run = take(&mut sample, len)?;
                    if packed.is_none() && !is_spliced {
                        packed = Some(run);
                    } else {
                        is_spliced = splice(&mut spliced, packed.take(), is_spliced);
                        spliced.extend_from_slice(run);
                    }
                }
                (2, 0) => values.push(varint(&mut sample)? as i64),
                (2, 2) => {
                    let len = varint(&mut sample)? as usize;
                    let mut run = take(&mut sample, len)?;
                    while !run.is_empty() {
                        values.push(varint(&mut run)? as i64);
                    }
                }
                (3, 2) if labels.truncated.0.is_some() || labels.only.is_some() => {
                    let len = varint(&mut sample)? as usize;
                    let (key, value) = label_strings(take(&mut sample, len)?)?;
                    let is =
                        |(k, v): (Option<i64>, Option<i64>)| k == Some(key) && v == Some(value);
                    truncated |= is(labels.truncated);
                    selected |= labels.only.is_some_and(is);
                }
                _ => {
                    field(&mut sample, wire_type)?;
                }
            }
        }
        let locations = if is_spliced {
            &spliced[..]
        } else {
            packed.unwrap_or(&[])
        };
        f(&SampleView {
            locations,
            values: &values,
            truncated,
            selected,
        });
    }
    Ok(count)
}

/// Moves a borrowed packed run into `spliced` the first time a second run shows up.
fn splice(spliced: &mut Vec<u8>, packed: Option<&[u8]>, already: bool) -> bool {
    if !already && let Some(run) = packed {
        spliced.extend_from_slice(run);
    }
    true
}

/// The key and string-value indices of an encoded `Label`.
fn label_strings(mut label: &[u8]) -> Result<(i64, i64), String> {
    let (mut key, mut str) = (0i64, 0i64);
    while !label.is_empty() {
        let k = varint(&mut label)?;
        match k {
            0x08 => key = varint(&mut label)? as i64,
            0x10 => str = varint(&mut label)? as i64,
            _ => {
                field(&mut label, k & 7)?;
            }
        }
    }
    Ok((key, str))
}

/// Decodes packed location ids.
pub fn location_ids(mut packed: &[u8]) -> impl Iterator<Item = Result<u64, String>> {
    std::iter::from_fn(move || (!packed.is_empty()).then(|| varint(&mut packed)))
}

/// A 128-bit hash of a stack's packed location ids. Two distinct stacks of one file share a key with
/// probability about n² / 2¹²⁹ (1e-27 for a million distinct stacks), so the key stands for the stack.
pub fn stack_key(bytes: &[u8]) -> (u64, u64) {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    let (mut a, mut b) = (bytes.len() as u64, !(bytes.len() as u64));
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        a = (a ^ w).wrapping_mul(K1).rotate_left(31);
        b = (b.rotate_left(23) ^ w).wrapping_mul(K2);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let w = u64::from_le_bytes(tail);
    a = (a ^ w).wrapping_mul(K1);
    b = (b.rotate_left(23) ^ w).wrapping_mul(K2);
    // Final avalanche (from splitmix64) so every input bit reaches every output bit.
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (mix(a), mix(b ^ a.rotate_left(17)))
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::profile::pprof::proto;

    #[test]
    fn reads_samples_like_prost_does() {
        let mut p = proto::Profile {
            string_table: vec!["".into(), "truncated".into(), "1".into()],
            ..Default::default()
        };
        p.sample.push(proto::Sample {
            location_id: vec![3, 300, 1],
            value: vec![5, 50_000_000],
            label: vec![],
        });
        let label = proto::Label {
            key: 1,
            str: 2,
            ..Default::default()
        };
        p.sample.push(proto::Sample {
            location_id: vec![],
            value: vec![-1],
            label: vec![label],
        });
        let bytes = p.encode_to_vec();
        let mut seen = Vec::new();
        let want = LabelIndexes::find(&p.string_table, None);
        let n = for_each_sample(&bytes, want, |s| {
            let ids: Vec<u64> = location_ids(s.locations).map(Result::unwrap).collect();
            seen.push((ids, s.values.to_vec(), s.truncated, s.selected));
        })
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seen[0], (vec![3, 300, 1], vec![5, 50_000_000], false, true));
        assert_eq!(seen[1], (vec![], vec![-1], true, true));
        // Only the samples with `truncated=1`; with a value no sample has, none.
        let mut selected = Vec::new();
        let only = LabelIndexes::find(&p.string_table, Some(("truncated", "1")));
        for_each_sample(&bytes, only, |s| selected.push(s.selected)).unwrap();
        assert_eq!(selected, [false, true]);
        selected.clear();
        let absent = LabelIndexes::find(&p.string_table, Some(("span_name", "checkout")));
        for_each_sample(&bytes, absent, |s| selected.push(s.selected)).unwrap();
        assert_eq!(selected, [false, false]);
    }

    #[test]
    fn unpacked_location_ids_are_spliced() {
        // Sample { location_id: 7 (unpacked), location_id: [8, 9] (packed) } inside Profile field 2.
        let sample = [0x08, 7, 0x0a, 2, 8, 9];
        let mut bytes = vec![0x12, sample.len() as u8];
        bytes.extend_from_slice(&sample);
        let mut ids = Vec::new();
        for_each_sample(&bytes, LabelIndexes::default(), |s| {
            ids = location_ids(s.locations).map(Result::unwrap).collect();
        })
        .unwrap();
        assert_eq!(ids, [7, 8, 9]);
    }

    #[test]
    fn stack_keys_differ_for_different_stacks() {
        assert_eq!(stack_key(&[1, 2, 3]), stack_key(&[1, 2, 3]));
        assert_ne!(stack_key(&[1, 2, 3]), stack_key(&[1, 2, 4]));
        assert_ne!(stack_key(&[0]), stack_key(&[0, 0]));
        assert_ne!(stack_key(&[]), stack_key(&[0]));
    }
}
