//! Loads gzip pprof files and merges each side of the diff into one table of stacks.
//!
//! Function names are interned once for both sides, so a stack is a slice of small ids (leaf first) and
//! the two sides can be compared id by id. Samples are streamed from the bytes ([`super::wire`]) instead
//! of materialising the whole `Profile`, and a stack seen before in a file is recognised by the hash of
//! its location ids, so a million-sample file costs one pass and no allocation per sample. The two sides
//! load on two threads.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
};

use flate2::read::MultiGzDecoder;
use prost::Message as _;

pub use super::frames::{FnId, Interner};
use super::{
    error::DiffError,
    frames::{Header, Tables},
    hash::FxHashMap,
    wire::{TruncatedLabel, for_each_sample, stack_key},
};

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
    pub stacks: FxHashMap<Box<[FnId]>, Weight>,
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

/// One side as loaded by its own thread, with its own interner.
struct SideLoad {
    side: Side,
    names: Interner,
    inlined: Vec<bool>,
    chosen: Chosen,
}

fn load_side(files: &[PathBuf], options: LoadOptions<'_>) -> Result<SideLoad, DiffError> {
    let (mut names, mut inlined, mut side, mut chosen) =
        (Interner::default(), Vec::new(), Side::default(), None);
    for path in files {
        load_file(
            path,
            options,
            &mut chosen,
            &mut names,
            &mut inlined,
            &mut side,
        )?;
    }
    let chosen = chosen.expect("clap requires at least one file per side");
    Ok(SideLoad {
        side,
        names,
        inlined,
        chosen,
    })
}

/// Reads both sides, one thread each; every file of both must carry the same sample type.
pub fn load_sides(
    base: &[PathBuf],
    new: &[PathBuf],
    options: LoadOptions<'_>,
) -> Result<Loaded, DiffError> {
    let (base, new) = std::thread::scope(|scope| {
        let new = scope.spawn(|| load_side(new, options));
        let base = load_side(base, options);
        (base, new.join().expect("the loader thread panicked"))
    });
    let SideLoad {
        side: mut base,
        mut names,
        mut inlined,
        chosen,
    } = base?;
    let mut other = new?;
    if options.sample_type.is_none() && other.chosen.name != chosen.name {
        // Each side picked its default alone; the base's choice wins, if the new side has it.
        let retry = LoadOptions {
            sample_type: Some(&chosen.name),
            ..options
        };
        other = match load_side(&other.side.files, retry) {
            Err(DiffError::MissingSampleType {
                path, available, ..
            }) => {
                return Err(DiffError::SampleTypeMismatch {
                    first: chosen.first,
                    first_type: format!("{}/{}", chosen.name, chosen.unit),
                    other: path,
                    other_type: available,
                });
            }
            result => result?,
        };
    }
    if other.chosen.unit != chosen.unit {
        return Err(DiffError::SampleTypeMismatch {
            first: chosen.first,
            first_type: format!("{}/{}", chosen.name, chosen.unit),
            other: other.chosen.first,
            other_type: format!("{}/{}", other.chosen.name, other.chosen.unit),
        });
    }
    // Re-key the new side's stacks with the base's ids.
    let remap: Vec<FnId> = (0..other.names.len())
        .map(|i| names.intern(other.names.name(i as FnId)))
        .collect();
    inlined.resize(names.len(), false);
    for (i, _) in other.inlined.iter().enumerate().filter(|(_, inl)| **inl) {
        inlined[remap[i] as usize] = true;
    }
    let mut new = other.side;
    new.stacks = std::mem::take(&mut new.stacks)
        .into_iter()
        .map(|(stack, w)| (stack.iter().map(|&f| remap[f as usize]).collect(), w))
        .collect();
    if options.fold_inlined {
        fold_inlined(&mut base, &inlined);
        fold_inlined(&mut new, &inlined);
    }
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
    // The gzip trailer holds the uncompressed size (mod 4 GiB) of the last member: presize with it, so
    // a large profile is not copied by repeated growth.
    let isize = raw
        .len()
        .checked_sub(4)
        .map(|at| u32::from_le_bytes(raw[at..].try_into().expect("4 bytes")));
    let mut bytes = Vec::with_capacity(isize.map_or(raw.len() * 4, |n| n as usize + 1));
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
    let started = std::time::Instant::now();
    let bytes = read_gzip(path)?;
    let gunzipped = started.elapsed();
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
    // The samples behind the values: for sampled off-CPU profiles the episodes actually tracked
    // (`tracked`), not the estimated events they stand for, or the noise would look smaller than it is.
    let count_index = types
        .iter()
        .position(|&(t, u)| t == "tracked" && u == "count")
        .or_else(|| {
            types
                .iter()
                .position(|&(t, u)| matches!(t, "samples" | "events") && u == "count")
        });
    let header_read = started.elapsed();
    let tables = Tables::build(path, &header, names, inlined, &string)?;

    let label = TruncatedLabel {
        key: strings
            .iter()
            .position(|s| s == "truncated")
            .map(|i| i as i64),
        value: strings.iter().position(|s| s == "1").map(|i| i as i64),
    };
    let period = header.period;
    // Stacks of this file, found by the hash of their packed location ids so a repeated stack is not
    // decoded, expanded and looked up in the side's table again.
    let mut slots: FxHashMap<(u64, u64), u32> = FxHashMap::default();
    let mut local: Vec<(Box<[FnId]>, Weight, bool)> = Vec::new();
    let mut stack = Vec::with_capacity(64);
    let mut bad = None;
    let seen = for_each_sample(&bytes, label, |sample| {
        let value = sample.values.get(value_index).copied().unwrap_or(0);
        let count = match count_index {
            Some(i) => sample.values.get(i).copied().unwrap_or(0) as f64,
            None if period > 0 => value as f64 / period as f64,
            None => 1.0,
        };
        if value == 0 && count == 0.0 {
            return;
        }
        let key = stack_key(sample.locations);
        let slot = match slots.get(&key) {
            Some(&slot) => slot as usize,
            None => match tables.expand(sample.locations, &mut stack) {
                Ok(root_unsymbolized) => {
                    local.push((
                        stack.as_slice().into(),
                        Weight::default(),
                        root_unsymbolized,
                    ));
                    slots.insert(key, local.len() as u32 - 1);
                    local.len() - 1
                }
                Err(reason) => {
                    bad.get_or_insert(reason);
                    return;
                }
            },
        };
        let (_, w, root_unsymbolized) = &mut local[slot];
        let weight = Weight { value, count };
        w.add(weight);
        side.total.add(weight);
        if sample.truncated || *root_unsymbolized {
            side.truncated_value += value;
        }
    })
    .map_err(not_pprof)?;
    for (frames, weight, _) in local {
        side.stacks.entry(frames).or_default().add(weight);
    }
    tracing::debug!(path = %path.display(), ?gunzipped, ?header_read, total = ?started.elapsed(), "read profile");
    if let Some(reason) = bad {
        return Err(not_pprof(reason));
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
