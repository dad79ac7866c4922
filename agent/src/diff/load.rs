//! Loads gzip pprof files and merges each side of the diff into one table of stacks.
//!
//! Function names are interned once for both sides, so a stack is a slice of small ids (leaf first) and
//! the two sides can be compared id by id. Samples are decoded one at a time into a reused message
//! instead of materialising the whole `Profile`, which keeps a million-sample file in a few tens of MiB.

use std::{
    collections::HashMap,
    io::Read as _,
    path::{Path, PathBuf},
};

use flate2::read::MultiGzDecoder;
use prost::Message as _;

use super::error::DiffError;
use crate::profile::pprof::proto;

/// An interned function name.
pub type FnId = u32;

/// Function names, each stored once; ids are dense from 0.
#[derive(Debug, Default)]
pub struct Interner {
    ids: HashMap<String, FnId>,
    names: Vec<String>,
}

impl Interner {
    /// The id of `name`, adding it on first sight.
    pub fn intern(&mut self, name: &str) -> FnId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as FnId;
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    /// The name of `id`.
    pub fn name(&self, id: FnId) -> &str {
        &self.names[id as usize]
    }

    /// How many names are interned.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when nothing is interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// The weight of a stack: its value in the chosen sample type and how many samples that value came from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Weight {
    /// Sum of the chosen sample type's values.
    pub value: i64,
    /// Number of samples behind `value` (exact when the profile has a count type, else value / period).
    pub count: f64,
}

impl Weight {
    fn add(&mut self, other: Weight) {
        self.value += other.value;
        self.count += other.count;
    }
}

/// One side of the diff: the merged stacks of all its files.
#[derive(Debug, Default)]
pub struct Side {
    /// Stacks as function ids, leaf first, with their weights.
    pub stacks: HashMap<Box<[FnId]>, Weight>,
    /// Sum over all stacks.
    pub total: Weight,
    /// Value of stacks that did not reach a thread entry point (label `truncated`, or unsymbolized root).
    pub truncated_value: i64,
    /// Sum of the files' capture durations.
    pub duration_nanos: i64,
    /// Distinct sampling periods of the files, sorted.
    pub periods: Vec<i64>,
    /// The files merged into this side.
    pub files: Vec<PathBuf>,
}

/// What to load and how to name frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions<'a> {
    /// Sample type to use (`cpu`, `samples`, `offcpu`, `events`...); `cpu` or the first when absent.
    pub sample_type: Option<&'a str>,
    /// Merge every function seen inlined (anywhere, in either side) into its caller, on both sides.
    pub fold_inlined: bool,
}

/// Both sides, loaded.
#[derive(Debug)]
pub struct Loaded {
    /// Names of the function ids in both sides.
    pub names: Interner,
    /// The baseline.
    pub base: Side,
    /// The profile compared against the baseline.
    pub new: Side,
    /// The sample type both sides were read with, `name/unit`.
    pub sample_type: String,
    /// The unit of the values.
    pub unit: String,
}

/// The chosen sample type, fixed by the first file read.
struct Chosen {
    name: String,
    unit: String,
    first: PathBuf,
}

/// Reads both sides; every file of both must carry the same sample type.
pub fn load_sides(
    base: &[PathBuf],
    new: &[PathBuf],
    options: LoadOptions<'_>,
) -> Result<Loaded, DiffError> {
    let mut names = Interner::default();
    let mut chosen = None;
    let mut sides = [Side::default(), Side::default()];
    let mut inlined = Vec::new();
    for (side, files) in sides.iter_mut().zip([base, new]) {
        for path in files {
            load_file(path, options, &mut chosen, &mut names, &mut inlined, side)?;
        }
    }
    if options.fold_inlined {
        sides
            .iter_mut()
            .for_each(|side| fold_inlined(side, &inlined));
    }
    let chosen = chosen.expect("clap requires at least one file per side");
    let [base, new] = sides;
    for (side, name) in [(&base, "base"), (&new, "new")] {
        if side.total.value == 0 {
            return Err(DiffError::EmptySide {
                side: name,
                sample_type: chosen.name.clone(),
            });
        }
    }
    Ok(Loaded {
        names,
        base,
        new,
        sample_type: format!("{}/{}", chosen.name, chosen.unit),
        unit: chosen.unit,
    })
}

/// `perftools.profiles.ValueType`, declared here so this module does not depend on the generated field
/// name of `type` (`ty` or `r#type`, depending on the prost configuration).
#[derive(Clone, PartialEq, prost::Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    name: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

/// Drops every frame of a function in `inlined` (except a stack's root), so its cost lands on its caller
/// whether the build inlined it or not, and whether the symbolizer reported the inline chain or not.
fn fold_inlined(side: &mut Side, inlined: &[bool]) {
    let is_inlined = |f: FnId| inlined.get(f as usize).copied().unwrap_or(false);
    let mut folded = Vec::with_capacity(64);
    for (stack, weight) in std::mem::take(&mut side.stacks) {
        folded.clear();
        let root = stack.len() - 1;
        folded.extend(
            stack
                .iter()
                .enumerate()
                .filter(|&(i, &f)| i == root || !is_inlined(f))
                .map(|(_, &f)| f),
        );
        match side.stacks.get_mut(folded.as_slice()) {
            Some(w) => w.add(weight),
            None => {
                side.stacks.insert(folded.as_slice().into(), weight);
            }
        }
    }
}

/// The parts of a pprof that samples refer to; the samples themselves are skipped here and streamed later.
#[derive(Clone, PartialEq, prost::Message)]
struct Header {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<proto::Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<proto::Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<proto::Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(int64, tag = "12")]
    period: i64,
}

/// Reads the file and returns the decompressed protobuf bytes.
fn read_gzip(path: &Path) -> Result<Vec<u8>, DiffError> {
    let raw = std::fs::read(path).map_err(|source| DiffError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Err(DiffError::NotGzip {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::with_capacity(raw.len() * 4);
    MultiGzDecoder::new(raw.as_slice())
        .read_to_end(&mut bytes)
        .map_err(|source| DiffError::CorruptGzip {
            path: path.to_owned(),
            source,
        })?;
    Ok(bytes)
}

fn load_file(
    path: &Path,
    options: LoadOptions<'_>,
    chosen: &mut Option<Chosen>,
    names: &mut Interner,
    inlined: &mut Vec<bool>,
    side: &mut Side,
) -> Result<(), DiffError> {
    let bytes = read_gzip(path)?;
    if bytes.is_empty() {
        return Err(DiffError::EmptyProfile {
            path: path.to_owned(),
            what: "data at all".into(),
        });
    }
    let not_pprof = |reason: String| DiffError::NotPprof {
        path: path.to_owned(),
        reason,
    };
    let header = Header::decode(bytes.as_slice()).map_err(|e| not_pprof(e.to_string()))?;
    let strings = &header.string_table;
    if strings.first().is_none_or(|s| !s.is_empty()) {
        return Err(not_pprof(
            "its string table does not start with the empty string".into(),
        ));
    }
    let string = |i: i64| -> Result<&str, DiffError> {
        usize::try_from(i)
            .ok()
            .and_then(|i| strings.get(i))
            .map(String::as_str)
            .ok_or_else(|| not_pprof(format!("string index {i} is out of range")))
    };
    if header.sample_type.is_empty() {
        return Err(DiffError::EmptyProfile {
            path: path.to_owned(),
            what: "sample types".into(),
        });
    }
    let types = header
        .sample_type
        .iter()
        .map(|t| Ok((string(t.name)?, string(t.unit)?)))
        .collect::<Result<Vec<_>, DiffError>>()?;
    let value_index = pick_sample_type(path, &types, options.sample_type, chosen)?;
    let count_index = types
        .iter()
        .position(|&(t, u)| matches!(t, "samples" | "events") && u == "count");
    let tables = Tables::build(path, &header, names, inlined, &string)?;

    let truncated_key = strings
        .iter()
        .position(|s| s == "truncated")
        .map(|i| i as i64);
    let one = strings.iter().position(|s| s == "1").map(|i| i as i64);
    let period = header.period;
    let mut stack = Vec::with_capacity(64);
    let mut seen = 0usize;
    let mut bad = None;
    for_each_sample(&bytes, |sample| {
        seen += 1;
        let value = sample.value.get(value_index).copied().unwrap_or(0);
        let count = match count_index {
            Some(i) => sample.value.get(i).copied().unwrap_or(0) as f64,
            None if period > 0 => value as f64 / period as f64,
            None => 1.0,
        };
        if value == 0 && count == 0.0 {
            return;
        }
        stack.clear();
        let mut root_unsymbolized = false;
        for &id in &sample.location_id {
            let Some(chain) = tables.chain(id) else {
                bad = Some(id);
                return;
            };
            stack.extend_from_slice(
                &tables.ids[chain.start as usize..(chain.start + chain.len) as usize],
            );
            root_unsymbolized = chain.unsymbolized;
        }
        if stack.is_empty() {
            stack.push(tables.no_frames);
        }
        let labelled = truncated_key.is_some_and(|k| {
            sample
                .label
                .iter()
                .any(|l| l.key == k && Some(l.str) == one && one.is_some())
        });
        if labelled || root_unsymbolized {
            side.truncated_value += value;
        }
        let weight = Weight { value, count };
        side.total.add(weight);
        match side.stacks.get_mut(stack.as_slice()) {
            Some(w) => w.add(weight),
            None => {
                side.stacks.insert(stack.as_slice().into(), weight);
            }
        }
    })
    .map_err(not_pprof)?;
    if let Some(id) = bad {
        return Err(not_pprof(format!(
            "a sample refers to location {id}, which the profile does not define"
        )));
    }
    if seen == 0 {
        return Err(DiffError::EmptyProfile {
            path: path.to_owned(),
            what: "samples".into(),
        });
    }
    side.duration_nanos += header.duration_nanos;
    if let Err(i) = side.periods.binary_search(&period) {
        side.periods.insert(i, period);
    }
    side.files.push(path.to_owned());
    Ok(())
}

/// Finds the index of the sample type to diff, and checks it agrees with the files read before.
fn pick_sample_type(
    path: &Path,
    types: &[(&str, &str)],
    wanted: Option<&str>,
    chosen: &mut Option<Chosen>,
) -> Result<usize, DiffError> {
    let describe = |(t, u): (&str, &str)| format!("{t}/{u}");
    let available = || {
        types
            .iter()
            .map(|&t| describe(t))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = match (wanted, chosen.as_ref()) {
        (Some(w), _) => w.to_owned(),
        (None, Some(c)) => c.name.clone(),
        (None, None) => match types.iter().find(|(t, _)| *t == "cpu") {
            Some((t, _)) => (*t).to_owned(),
            None => types[0].0.to_owned(),
        },
    };
    let Some(index) = types.iter().position(|(t, _)| *t == name) else {
        return Err(match (wanted, chosen.as_ref()) {
            (None, Some(c)) => DiffError::SampleTypeMismatch {
                first: c.first.clone(),
                first_type: format!("{}/{}", c.name, c.unit),
                other: path.to_owned(),
                other_type: available(),
            },
            _ => DiffError::MissingSampleType {
                path: path.to_owned(),
                wanted: name,
                available: available(),
            },
        });
    };
    let unit = types[index].1;
    match chosen {
        Some(c) if c.unit != unit => Err(DiffError::SampleTypeMismatch {
            first: c.first.clone(),
            first_type: format!("{}/{}", c.name, c.unit),
            other: path.to_owned(),
            other_type: describe(types[index]),
        }),
        Some(_) => Ok(index),
        None => {
            *chosen = Some(Chosen {
                name,
                unit: unit.to_owned(),
                first: path.to_owned(),
            });
            Ok(index)
        }
    }
}

/// Where one location's functions sit in [`Tables::ids`].
#[derive(Clone, Copy, Debug)]
struct Chain {
    start: u32,
    len: u32,
    unsymbolized: bool,
}

/// Per-file lookup from pprof location id to the interned functions of that location, leaf first.
struct Tables {
    ids: Vec<FnId>,
    /// Indexed by location id when the ids are dense (the usual case), else empty.
    dense: Vec<Option<Chain>>,
    sparse: HashMap<u64, Chain>,
    no_frames: FnId,
}

impl Tables {
    fn build<'s>(
        path: &Path,
        header: &'s Header,
        names: &mut Interner,
        inlined: &mut Vec<bool>,
        string: &impl Fn(i64) -> Result<&'s str, DiffError>,
    ) -> Result<Self, DiffError> {
        let mut functions = HashMap::with_capacity(header.function.len());
        for f in &header.function {
            let name = string(f.name)?;
            let name = if name.is_empty() {
                string(f.system_name)?
            } else {
                name
            };
            functions.insert(
                f.id,
                names.intern(if name.is_empty() { "[unknown]" } else { name }),
            );
        }
        let mappings: HashMap<u64, &proto::Mapping> =
            header.mapping.iter().map(|m| (m.id, m)).collect();
        let max_id = header.location.iter().map(|l| l.id).max().unwrap_or(0);
        let dense_ok = max_id <= 4 * header.location.len() as u64 + 1024;
        let mut tables = Tables {
            ids: Vec::with_capacity(header.location.len() * 2),
            dense: if dense_ok {
                vec![None; max_id as usize + 1]
            } else {
                Vec::new()
            },
            sparse: HashMap::new(),
            no_frames: names.intern("[no frames]"),
        };
        for location in &header.location {
            let start = tables.ids.len() as u32;
            let unsymbolized = location.line.is_empty();
            if unsymbolized {
                tables
                    .ids
                    .push(names.intern(&unsymbolized_name(location, &mappings, string)?));
            } else {
                // lines[0] is the innermost inlined function, the last line the containing function.
                let outermost = location.line.len() - 1;
                for (i, line) in location.line.iter().enumerate() {
                    let id = functions.get(&line.function_id).copied().ok_or_else(|| {
                        DiffError::NotPprof {
                            path: path.to_owned(),
                            reason: format!(
                                "location {} refers to undefined function {}",
                                location.id, line.function_id
                            ),
                        }
                    })?;
                    if i < outermost {
                        if inlined.len() <= id as usize {
                            inlined.resize(id as usize + 1, false);
                        }
                        inlined[id as usize] = true;
                    }
                    tables.ids.push(id);
                }
            }
            let chain = Chain {
                start,
                len: tables.ids.len() as u32 - start,
                unsymbolized,
            };
            if dense_ok {
                tables.dense[location.id as usize] = Some(chain);
            } else {
                tables.sparse.insert(location.id, chain);
            }
        }
        Ok(tables)
    }

    fn chain(&self, id: u64) -> Option<Chain> {
        if self.dense.is_empty() {
            self.sparse.get(&id).copied()
        } else {
            self.dense.get(id as usize).copied().flatten()
        }
    }
}

/// `<mapping basename>+0x<offset in the file>`, or `[unknown]+0x<address>` without a mapping.
fn unsymbolized_name<'s>(
    location: &proto::Location,
    mappings: &HashMap<u64, &proto::Mapping>,
    string: &impl Fn(i64) -> Result<&'s str, DiffError>,
) -> Result<String, DiffError> {
    Ok(match mappings.get(&location.mapping_id) {
        Some(m) => {
            let file = string(m.filename)?;
            let base = file
                .rsplit('/')
                .next()
                .filter(|b| !b.is_empty())
                .unwrap_or("[unknown]");
            let offset = location
                .address
                .wrapping_sub(m.memory_start)
                .wrapping_add(m.file_offset);
            format!("{base}+{offset:#x}")
        }
        None => format!("[unknown]+{:#x}", location.address),
    })
}

/// Calls `f` for each `Profile.sample` (field 2) of the encoded profile, decoding into one reused message.
fn for_each_sample(mut buf: &[u8], mut f: impl FnMut(&proto::Sample)) -> Result<(), String> {
    use prost::encoding::decode_varint;
    let mut sample = proto::Sample::default();
    let skip = |buf: &mut &[u8], n: usize| -> Result<(), String> {
        if buf.len() < n {
            return Err("truncated protobuf".into());
        }
        *buf = &buf[n..];
        Ok(())
    };
    while !buf.is_empty() {
        let key = decode_varint(&mut buf).map_err(|e| e.to_string())?;
        match key & 7 {
            0 => {
                decode_varint(&mut buf).map_err(|e| e.to_string())?;
            }
            1 => skip(&mut buf, 8)?,
            2 => {
                let len = decode_varint(&mut buf).map_err(|e| e.to_string())? as usize;
                if len > buf.len() {
                    return Err("truncated protobuf".into());
                }
                let (message, rest) = buf.split_at(len);
                if key >> 3 == 2 {
                    sample.clear();
                    sample.merge(message).map_err(|e| e.to_string())?;
                    f(&sample);
                }
                buf = rest;
            }
            5 => skip(&mut buf, 4)?,
            other => return Err(format!("unsupported wire type {other}")),
        }
    }
    Ok(())
}
