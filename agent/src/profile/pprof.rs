//! Encodes a [`Profile`] as a gzip-compressed pprof (`perftools.profiles.Profile`).
//!
//! Locations are deduplicated per (mapping, address), functions per (name, file), mappings per module,
//! strings through one table. Each sample carries the labels `pid` (numeric) and `comm`. Workload tags go
//! into the profile's `comment` strings as `key=value` ([`encode_gzip_tagged`]).

use std::{borrow::Cow, sync::Arc};

use foldhash::HashMap;

use prost::Message as _;

use super::model::{Frame, FrameKind, Module, Profile};

/// The generated `perftools.profiles` types.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

/// Builds a pprof message while deduplicating its tables. Strings are borrowed from the profile
/// until the message is made: a daemon window encodes one profile per process, and copying every
/// function name twice (table and key) per profile was most of the encoding's time.
#[derive(Default)]
pub struct PprofBuilder<'a> {
    strings: HashMap<&'a str, i64>,
    table: Vec<Cow<'a, str>>,
    mappings: HashMap<Arc<Module>, u64>,
    /// By the string-table indices of (name, file): looked up without allocating.
    functions: HashMap<(i64, i64), u64>,
    locations: HashMap<(u64, u64, bool, FrameKind, Option<String>), u64>,
    out: proto::Profile,
}

impl<'a> PprofBuilder<'a> {
    /// Interns `s` in the string table.
    pub fn string(&mut self, s: &'a str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(Cow::Borrowed(s));
        self.strings.insert(s, i);
        i
    }

    fn mapping(&mut self, module: &'a Arc<Module>) -> u64 {
        if let Some(&id) = self.mappings.get(module) {
            return id;
        }
        let id = self.out.mapping.len() as u64 + 1;
        let filename = self.string(&module.path);
        let build_id = self.string(module.build_id.as_deref().unwrap_or(""));
        self.out.mapping.push(proto::Mapping {
            id,
            memory_start: module.start,
            memory_limit: module.limit,
            file_offset: module.file_offset,
            filename,
            build_id,
            has_functions: true,
            ..Default::default()
        });
        self.mappings.insert(module.clone(), id);
        id
    }

    fn function(&mut self, name: &'a str, file: Option<&'a str>) -> u64 {
        let name = self.string(name);
        let filename = self.string(file.unwrap_or(""));
        if let Some(&id) = self.functions.get(&(name, filename)) {
            return id;
        }
        let id = self.out.function.len() as u64 + 1;
        self.out.function.push(proto::Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.functions.insert((name, filename), id);
        id
    }

    fn location(&mut self, frame: &'a Frame) -> u64 {
        let mapping_id = frame.module.as_ref().map(|m| self.mapping(m)).unwrap_or(0);
        // Markers have no address: key them by their name so different markers stay apart.
        let marker = (frame.kind == FrameKind::Marker).then(|| frame.display_name());
        let key = (
            mapping_id,
            frame.address,
            frame.return_address,
            frame.kind,
            marker,
        );
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.out.location.len() as u64 + 1;
        let line = frame
            .symbols
            .iter()
            .map(|s| proto::Line {
                function_id: self.function(&s.name, s.file.as_deref()),
                line: s.line.map(i64::from).unwrap_or(0),
            })
            .collect();
        self.out.location.push(proto::Location {
            id,
            mapping_id,
            address: frame.address,
            line,
            is_folded: false,
        });
        self.locations.insert(key, id);
        id
    }

    /// Adds `comment` (a `key=value` tag) to the profile's comments.
    pub fn comment(&mut self, comment: String) {
        // Not interned: a tag is not otherwise a string of the profile.
        let index = self.table.len() as i64;
        self.table.push(Cow::Owned(comment));
        self.out.comment.push(index);
    }

    /// Builds the pprof message for `profile`.
    pub fn build(mut self, profile: &'a Profile) -> proto::Profile {
        self.string("");
        let sample_type = profile
            .kind
            .sample_types()
            .iter()
            .map(|(t, u)| proto::ValueType {
                r#type: self.string(t),
                unit: self.string(u),
            })
            .collect();
        self.out.sample_type = sample_type;
        let (pt, pu) = profile.kind.period_type();
        self.out.period_type = Some(proto::ValueType {
            r#type: self.string(pt),
            unit: self.string(pu),
        });
        self.out.period = profile.period;
        self.out.time_nanos = profile.time_nanos;
        self.out.duration_nanos = profile.duration_nanos;
        let (pid_key, comm_key) = (self.string("pid"), self.string("comm"));
        // Parca's and Pyroscope's names for the thread: `thread_name` holds the same string as
        // `comm` (kept for the tools that read it), interned once in the string table.
        let (tid_key, thread_name_key) = (self.string("thread_id"), self.string("thread_name"));
        let (truncated_key, one) = (self.string("truncated"), self.string("1"));
        for sample in &profile.samples {
            let location_id = sample.frames.iter().map(|f| self.location(f)).collect();
            let mut label = vec![
                proto::Label {
                    key: pid_key,
                    num: i64::from(sample.pid),
                    ..Default::default()
                },
                proto::Label {
                    key: comm_key,
                    str: self.string(&sample.comm),
                    ..Default::default()
                },
                proto::Label {
                    key: tid_key,
                    num: i64::from(sample.tid),
                    ..Default::default()
                },
                proto::Label {
                    key: thread_name_key,
                    str: self.string(&sample.comm),
                    ..Default::default()
                },
            ];
            // The process's own labels (Go's pprof labels), as Go's profiler writes them.
            for (key, value) in sample.labels.iter() {
                label.push(proto::Label {
                    key: self.string(key),
                    str: self.string(value),
                    ..Default::default()
                });
            }
            // Lets consumers (sonde diff) weigh profiles with missing frame pointers.
            if sample.truncated {
                label.push(proto::Label {
                    key: truncated_key,
                    str: one,
                    ..Default::default()
                });
            }
            self.out.sample.push(proto::Sample {
                location_id,
                value: sample.values.clone(),
                label,
            });
        }
        self.out.string_table = self.table.into_iter().map(Cow::into_owned).collect();
        self.out
    }
}

/// Encodes `profile` as gzip-compressed pprof bytes.
pub fn encode_gzip(profile: &Profile) -> Vec<u8> {
    encode_gzip_tagged(profile, std::iter::empty())
}

/// Encodes `profile` as gzip-compressed pprof bytes with each tag as a `key=value` comment.
pub fn encode_gzip_tagged<'a>(
    profile: &Profile,
    tags: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<u8> {
    super::gzip::compress(&encode_tagged(profile, tags))
}

/// Encodes `profile` as (uncompressed) pprof bytes with each tag as a `key=value` comment.
pub(crate) fn encode_tagged<'a>(
    profile: &Profile,
    tags: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<u8> {
    let mut builder = PprofBuilder::default();
    // The empty string must be index 0 before any comment is interned.
    builder.string("");
    for (key, value) in tags {
        builder.comment(format!("{key}={value}"));
    }
    for (key, value) in &profile.notes {
        builder.comment(format!("{key}={value}"));
    }
    builder.build(profile).encode_to_vec()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::profile::{ProfileKind, StackSample, Symbol};

    fn frame(address: u64, return_address: bool, name: &str) -> Frame {
        Frame {
            address,
            kind: FrameKind::User,
            return_address,
            module: None,
            symbols: Arc::from(vec![Symbol {
                name: name.into(),
                file: None,
                line: None,
            }]),
        }
    }

    fn sample(frames: Vec<Frame>) -> StackSample {
        StackSample {
            pid: 1,
            tid: 1,
            comm: "p".into(),
            frames,
            values: vec![1, 10],
            truncated: false,
            labels: Default::default(),
        }
    }

    /// Go's preemption makes this shape: the instruction right after an inlined call is a leaf in
    /// one sample and, pushed by the injected `asyncPreempt` call, a return address in another.
    /// Each keeps its own name whichever comes first.
    #[test]
    fn one_address_sampled_exactly_and_as_a_return_address_is_two_locations() {
        for exact_first in [true, false] {
            let leaf = sample(vec![frame(0x100, false, "spin")]);
            let under = sample(vec![
                frame(0x900, false, "asyncPreempt"),
                frame(0x100, true, "mix"),
            ]);
            let samples = if exact_first {
                vec![leaf, under]
            } else {
                vec![under, leaf]
            };
            let profile = Profile {
                kind: ProfileKind::Cpu,
                time_nanos: 0,
                duration_nanos: 1,
                period: 10,
                samples,
                notes: Vec::new(),
            };
            let out = PprofBuilder::default().build(&profile);
            let name_at = |sample: usize, depth: usize| {
                let location = out.sample[sample].location_id[depth];
                let l = &out.location[location as usize - 1];
                let function = &out.function[l.line[0].function_id as usize - 1];
                (l.address, out.string_table[function.name as usize].clone())
            };
            let (leaf_at, under_at) = if exact_first { (0, 1) } else { (1, 0) };
            assert_eq!(name_at(leaf_at, 0), (0x100, "spin".to_owned()));
            assert_eq!(name_at(under_at, 1), (0x100, "mix".to_owned()));
        }
    }
}
