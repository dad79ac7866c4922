//! Loads gzip pprof files (or profiles fetched from a backend) and merges each side of the diff into one
//! table of stacks.
//!
//! Function names are interned once for both sides, so a stack is a slice of small ids (leaf first) and
//! the two sides can be compared id by id. Samples are streamed from the bytes ([`super::wire`]) instead
//! of materialising the whole `Profile`, and a stack seen before in a file is recognised by the hash of
//! its location ids, so a million-sample file costs one pass and no allocation per sample. The two sides
//! load on two threads.

use std::path::{Path, PathBuf};

use prost::Message as _;

pub use super::frames::{FnId, Interner};
pub use super::input::Limits;
use super::{
    budget::{StackBudget, TableSizes},
    error::DiffError,
    frames::{Header, Tables},
    hash::FxHashMap,
    input,
    values::{Chosen, pick_sample_type, sample_weight},
    wire::{LabelIndexes, for_each_sample, stack_key},
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
    /// `self + other`, or None when the value overflows.
    fn checked_add(self, other: Weight) -> Option<Weight> {
        Some(Weight {
            value: self.value.checked_add(other.value)?,
            count: self.count + other.count,
        })
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
    /// Malformed samples skipped under `--lenient`, per file that had any.
    pub skipped: Vec<(PathBuf, u64)>,
}

/// One input of a side.
#[derive(Clone, Debug)]
pub enum Source {
    /// A gzip pprof file, or `-` for standard input.
    File(PathBuf),
    /// A profile of a data directory: its file, whole, or its slice when the file is a pack.
    Indexed {
        /// The file under the data directory.
        path: PathBuf,
        /// Its index line (where in the decompressed file the profile is).
        entry: super::datadir::Entry,
    },
    /// A profile fetched from a backend: its uncompressed pprof bytes, and the name messages give it.
    Fetched {
        /// Names the backend and the query, where a file would be named by its path.
        name: PathBuf,
        /// The encoded `perftools.profiles.Profile`.
        bytes: Vec<u8>,
    },
}

impl Source {
    fn is_stdin(&self) -> bool {
        matches!(self, Source::File(path) if path.as_os_str() == input::STDIN)
    }
}

/// What to load and how to name frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions<'a> {
    /// Sample type to use (`cpu`, `samples`, `offcpu`, `events`...); `cpu` or the first when absent.
    pub sample_type: Option<&'a str>,
    /// Merge every function seen inlined (anywhere, in either side) into its caller, on both sides.
    pub fold_inlined: bool,
    /// How much of each input is read and decoded.
    pub limits: Limits,
    /// Skip (and count) malformed samples instead of failing.
    pub lenient: bool,
    /// Read only the samples carrying this label, key and value (`--label span_name=checkout`).
    pub label: Option<(&'a str, &'a str)>,
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

/// One side as loaded by its own thread, with its own interner.
struct SideLoad {
    side: Side,
    names: Interner,
    inlined: Vec<bool>,
    chosen: Chosen,
}

fn load_side(sources: &[Source], options: LoadOptions<'_>) -> Result<SideLoad, DiffError> {
    let (mut names, mut inlined, mut side, mut chosen) =
        (Interner::default(), Vec::new(), Side::default(), None);
    // The last data-directory file decompressed: a window's pack holds the profiles that follow.
    let mut unpacked: Option<(&Path, Vec<u8>)> = None;
    for source in sources {
        let (chosen, names, inlined, side) = (&mut chosen, &mut names, &mut inlined, &mut side);
        match source {
            Source::File(path) => load_file(path, options, chosen, names, inlined, side)?,
            Source::Indexed { path, entry } => {
                if unpacked.as_ref().is_none_or(|(p, _)| *p != path.as_path()) {
                    unpacked = Some((path, input::read_gzip(path, options.limits)?));
                }
                let (_, bytes) = unpacked.as_ref().expect("just filled");
                let bytes = entry
                    .profile_in(bytes)
                    .map_err(|reason| DiffError::NotPprof {
                        path: path.clone(),
                        reason,
                    })?;
                let name = match entry.offset {
                    Some(offset) => PathBuf::from(format!("{}@{offset}", path.display())),
                    None => path.clone(),
                };
                load_bytes(&name, bytes, options, chosen, names, inlined, side)?;
            }
            Source::Fetched { name, bytes } => {
                load_bytes(name, bytes, options, chosen, names, inlined, side)?;
            }
        }
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
    base: &[Source],
    new: &[Source],
    options: LoadOptions<'_>,
) -> Result<Loaded, DiffError> {
    if base.iter().chain(new).filter(|s| s.is_stdin()).count() > 1 {
        return Err(DiffError::StdinTwice);
    }
    let new_sources = new;
    let (base, new) = if new.iter().any(Source::is_stdin) {
        // Standard input cannot be read twice, so the new side must not need the reload below: it is read
        // after the base, with the base's sample type.
        let base = load_side(base, options)?;
        let wanted = options.sample_type.unwrap_or(&base.chosen.name).to_owned();
        let sample_type = Some(wanted.as_str());
        let new = load_side(
            new,
            LoadOptions {
                sample_type,
                ..options
            },
        );
        (Ok(base), new)
    } else {
        std::thread::scope(|scope| {
            let new = scope.spawn(|| load_side(new, options));
            let base = load_side(base, options);
            (base, new.join().expect("the loader thread panicked"))
        })
    };
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
        other = match load_side(new_sources, retry) {
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
            // Stacks of one side are parts of its total, which was checked not to overflow.
            Some(w) => {
                w.value = w.value.saturating_add(weight.value);
                w.count += weight.count;
            }
            None => {
                side.stacks.insert(folded.as_slice().into(), weight);
            }
        }
    }
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
    let bytes = input::read_gzip(path, options.limits)?;
    tracing::debug!(path = %path.display(), gunzipped = ?started.elapsed(), "decompressed");
    load_bytes(
        input::shown(path),
        &bytes,
        options,
        chosen,
        names,
        inlined,
        side,
    )?;
    tracing::debug!(path = %path.display(), total = ?started.elapsed(), "read profile");
    Ok(())
}

/// Decodes one input's protobuf bytes into `side`.
fn load_bytes(
    path: &Path,
    bytes: &[u8],
    options: LoadOptions<'_>,
    chosen: &mut Option<Chosen>,
    names: &mut Interner,
    inlined: &mut Vec<bool>,
    side: &mut Side,
) -> Result<(), DiffError> {
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
    // Measure the tables before decoding them: decoding is where a small input becomes a large heap.
    let limit = options.limits.max_input_bytes();
    let (decoded, table, entries) = TableSizes::scan(bytes).map_err(not_pprof)?.decoded_bytes();
    if decoded > limit {
        return Err(DiffError::TablesTooLarge {
            path: path.to_owned(),
            table,
            entries,
            decoded_mib: decoded >> 20,
            limit_mib: options.limits.max_input_mib,
        });
    }
    let header = Header::decode(bytes).map_err(|e| not_pprof(e.to_string()))?;
    let strings = &header.string_table;
    if strings.first().is_none_or(|s| !s.is_empty()) {
        return Err(not_pprof(
            "its string table does not start with the empty string".into(),
        ));
    }
    if header.duration_nanos < 0 {
        return Err(not_pprof(format!(
            "its duration is negative ({} ns)",
            header.duration_nanos
        )));
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
    let sample_type = types[value_index].0;
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
    let tables = Tables::build(path, &header, names, inlined, &string)?;
    let mut stack_budget = StackBudget::new(limit - decoded);

    let label = LabelIndexes::find(strings, options.label);
    let period = header.period;
    let overflow = |what| DiffError::Overflow {
        path: path.to_owned(),
        sample_type: sample_type.to_owned(),
        what,
    };
    // Stacks of this file, found by the hash of their packed location ids so a repeated stack is not
    // decoded, expanded and looked up in the side's table again.
    let mut slots: FxHashMap<(u64, u64), u32> = FxHashMap::default();
    let mut local: Vec<(Box<[FnId]>, Weight, bool)> = Vec::new();
    let mut stack = Vec::with_capacity(64);
    let (mut bad, mut index, mut skipped) = (None, 0usize, 0u64);
    let mut total = side.total;
    let mut truncated_value = side.truncated_value;
    let seen = for_each_sample(bytes, label, |sample| {
        index += 1;
        if bad.is_some() || !sample.selected {
            return;
        }
        let (value, count) = match sample_weight(sample.values, &types, value_index, count_index) {
            Ok(weight) => weight,
            Err(problem) if options.lenient => {
                skipped += 1;
                tracing::debug!(path = %path.display(), sample = index - 1, problem, "skipped");
                return;
            }
            Err(problem) => {
                bad = Some(DiffError::MalformedSample {
                    path: path.to_owned(),
                    index: index - 1,
                    problem,
                });
                return;
            }
        };
        let count = match count {
            Some(count) => count as f64,
            None if period > 0 => value as f64 / period as f64,
            None => 1.0,
        };
        if value == 0 && count == 0.0 {
            return;
        }
        let key = stack_key(sample.locations);
        let slot = match slots.get(&key) {
            Some(&slot) => slot as usize,
            None => {
                let max_frames = stack_budget.frames_left();
                match tables.expand(sample.locations, &mut stack, max_frames) {
                    Ok(root_unsymbolized) if stack_budget.take(stack.len()) => {
                        local.push((
                            stack.as_slice().into(),
                            Weight::default(),
                            root_unsymbolized,
                        ));
                        slots.insert(key, local.len() as u32 - 1);
                        local.len() - 1
                    }
                    Ok(_) => {
                        bad = Some(DiffError::TablesTooLarge {
                            path: path.to_owned(),
                            table: "expanded stacks",
                            entries: local.len() as u64 + 1,
                            decoded_mib: (decoded + stack_budget.cost(stack.len())) >> 20,
                            limit_mib: options.limits.max_input_mib,
                        });
                        return;
                    }
                    Err(reason) => {
                        bad = Some(not_pprof(reason));
                        return;
                    }
                }
            }
        };
        let weight = Weight { value, count };
        let (_, w, root_unsymbolized) = &mut local[slot];
        let truncated = sample.truncated || *root_unsymbolized;
        let sums = (
            w.checked_add(weight),
            total.checked_add(weight),
            truncated_value.checked_add(if truncated { value } else { 0 }),
        );
        match sums {
            (Some(stack_sum), Some(side_sum), Some(truncated_sum)) => {
                *w = stack_sum;
                total = side_sum;
                truncated_value = truncated_sum;
            }
            _ => bad = Some(overflow("samples")),
        }
    })
    .map_err(not_pprof)?;
    if let Some(err) = bad {
        return Err(err);
    }
    if seen == 0 {
        return Err(DiffError::EmptyProfile {
            path: path.to_owned(),
            what: "samples".into(),
        });
    }
    for (frames, weight, _) in local {
        let w = side.stacks.entry(frames).or_default();
        *w = w.checked_add(weight).ok_or_else(|| overflow("samples"))?;
    }
    side.total = total;
    side.truncated_value = truncated_value;
    side.duration_nanos = side
        .duration_nanos
        .checked_add(header.duration_nanos)
        .ok_or_else(|| overflow("capture durations"))?;
    if let Err(i) = side.periods.binary_search(&period) {
        side.periods.insert(i, period);
    }
    if skipped > 0 {
        side.skipped.push((path.to_owned(), skipped));
    }
    side.files.push(path.to_owned());
    Ok(())
}

/// Decodes the protobuf bytes of one pprof as `sonde diff` does, for the fuzz target of the decoder.
#[doc(hidden)]
pub fn decode_for_fuzzing(bytes: &[u8]) -> Result<(), DiffError> {
    let options = LoadOptions {
        limits: Limits { max_input_mib: 64 },
        ..LoadOptions::default()
    };
    let (mut names, mut inlined, mut side) = (Interner::default(), Vec::new(), Side::default());
    load_bytes(
        Path::new("fuzz.pb"),
        bytes,
        options,
        &mut None,
        &mut names,
        &mut inlined,
        &mut side,
    )
}
