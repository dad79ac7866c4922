//! Encodes a [`Batch`] as OTLP profiles requests (layout v1.10): one `ProfilesDictionary` per request shared
//! by all its profiles (strings, mappings, functions, locations, stacks and attributes deduplicated), one
//! `ResourceProfiles` per workload identity with the tags as resource attributes, and one OTLP `Profile` per
//! value type (v1.10 profiles carry a single sample type). Requests over the size limit are split in halves
//! (by workload, then by samples), each half with its own dictionary.

use std::{collections::HashMap, ops::Range, sync::Arc};

use sonde_abi::thread_ctx::{SPAN_ID_LABEL as SPAN_ID, TRACE_ID_LABEL as TRACE_ID};

use crate::{
    export::Batch,
    metadata::{Tags, keys},
    profile::{
        Frame, FrameKind, Module, Profile,
        otlp_proto::{collector::ExportProfilesServiceRequest, common, profiles as pb, resource},
    },
};

/// gRPC's default receive limit; requests stay below it.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// Room left for gRPC framing and the limit's rounding.
const HEADROOM: usize = 16 * 1024;

/// Encodes `batch` into requests of at most `max_bytes` (encoded, before compression) each, except when a
/// single sample is larger than that.
pub fn encode_batch(batch: &Batch, max_bytes: usize) -> Vec<ExportProfilesServiceRequest> {
    let parts: Vec<Part<'_>> = batch
        .profiles
        .iter()
        .map(|(tags, profile)| Part {
            tags,
            profile,
            samples: 0..profile.samples.len(),
        })
        .collect();
    if parts.is_empty() {
        if batch.heartbeat.is_empty() {
            return Vec::new();
        }
        // An idle window: the agent's resource alone says it is alive and what it covers.
        return vec![ExportProfilesServiceRequest {
            resource_profiles: vec![resource_profiles(&batch.heartbeat, &Tags::new())],
            dictionary: Some(Dictionary::new().out),
        }];
    }
    let mut out = Vec::new();
    split_into(
        parts,
        &batch.heartbeat,
        max_bytes.saturating_sub(HEADROOM).max(1),
        &mut out,
    );
    out
}

/// A slice of one workload's profile.
#[derive(Clone)]
struct Part<'a> {
    tags: &'a Tags,
    profile: &'a Profile,
    samples: Range<usize>,
}

fn split_into(
    parts: Vec<Part<'_>>,
    heartbeat: &Tags,
    max_bytes: usize,
    out: &mut Vec<ExportProfilesServiceRequest>,
) {
    let request = build(&parts, heartbeat);
    if prost::Message::encoded_len(&request) <= max_bytes {
        out.push(request);
        return;
    }
    if parts.len() > 1 {
        let mut left = parts;
        let right = left.split_off(left.len() / 2);
        split_into(left, heartbeat, max_bytes, out);
        split_into(right, heartbeat, max_bytes, out);
        return;
    }
    let part = &parts[0];
    if part.samples.len() <= 1 {
        tracing::warn!(
            bytes = prost::Message::encoded_len(&request),
            "one sample exceeds the OTLP request size limit"
        );
        out.push(request);
        return;
    }
    let mid = part.samples.start + part.samples.len() / 2;
    let left = Part {
        samples: part.samples.start..mid,
        ..part.clone()
    };
    let right = Part {
        samples: mid..part.samples.end,
        ..part.clone()
    };
    split_into(vec![left], heartbeat, max_bytes, out);
    split_into(vec![right], heartbeat, max_bytes, out);
}

fn build(parts: &[Part<'_>], heartbeat: &Tags) -> ExportProfilesServiceRequest {
    let mut dict = Dictionary::new();
    let mut resources: Vec<(&Tags, pb::ResourceProfiles)> = Vec::new();
    for part in parts {
        let profiles = dict.profiles(part);
        let slot = match resources.iter().position(|(t, _)| *t == part.tags) {
            Some(i) => i,
            None => {
                resources.push((part.tags, resource_profiles(part.tags, heartbeat)));
                resources.len() - 1
            }
        };
        resources[slot].1.scope_profiles[0]
            .profiles
            .extend(profiles);
    }
    ExportProfilesServiceRequest {
        resource_profiles: resources.into_iter().map(|(_, r)| r).collect(),
        dictionary: Some(dict.out),
    }
}

/// The workload's tags, then the agent's heartbeat attributes (the workload's win on a clash).
fn resource_profiles(tags: &Tags, heartbeat: &Tags) -> pb::ResourceProfiles {
    let attributes = tags
        .iter()
        .chain(heartbeat.iter().filter(|(k, _)| tags.get(k).is_none()))
        .map(|(k, v)| {
            // process.pid is an int in the semantic conventions, and sonde's own figures are numbers;
            // everything else is a string.
            let value = match (k, v.parse::<i64>(), v.parse::<f64>()) {
                (keys::PROCESS_PID, Ok(n), _) => common::any_value::Value::IntValue(n),
                (k, Ok(n), _) if k.starts_with("sonde.") => common::any_value::Value::IntValue(n),
                (k, _, Ok(x)) if k.starts_with("sonde.") => {
                    common::any_value::Value::DoubleValue(x)
                }
                _ => common::any_value::Value::StringValue(v.to_owned()),
            };
            common::KeyValue {
                key: k.to_owned(),
                value: Some(common::AnyValue { value: Some(value) }),
                ..Default::default()
            }
        })
        .collect();
    pb::ResourceProfiles {
        resource: Some(resource::Resource {
            attributes,
            ..Default::default()
        }),
        scope_profiles: vec![pb::ScopeProfiles {
            scope: Some(common::InstrumentationScope {
                name: "sonde".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                ..Default::default()
            }),
            profiles: Vec::new(),
            schema_url: String::new(),
        }],
        schema_url: String::new(),
    }
}

/// A value of a dictionary attribute.
#[derive(Clone, PartialEq, Eq, Hash)]
enum AttrValue {
    Str(String),
    Int(i64),
}

/// Builds one request's `ProfilesDictionary`. Index 0 of every table is the zero value, as the spec requires.
struct Dictionary {
    out: pb::ProfilesDictionary,
    strings: HashMap<String, i32>,
    mappings: HashMap<Arc<Module>, i32>,
    functions: HashMap<(i32, i32), i32>,
    locations: HashMap<(i32, u64, bool, FrameKind, i32), i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i32, AttrValue), i32>,
    links: HashMap<(Vec<u8>, Vec<u8>), i32>,
}

impl Dictionary {
    fn new() -> Self {
        let mut d = Self {
            out: pb::ProfilesDictionary {
                mapping_table: vec![pb::Mapping::default()],
                location_table: vec![pb::Location::default()],
                function_table: vec![pb::Function::default()],
                link_table: vec![pb::Link::default()],
                string_table: Vec::new(),
                attribute_table: vec![pb::KeyValueAndUnit::default()],
                stack_table: vec![pb::Stack::default()],
            },
            strings: HashMap::new(),
            mappings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            attributes: HashMap::new(),
            links: HashMap::new(),
        };
        d.string("");
        d
    }

    /// The `link_table` index of the span `labels` name (`trace_id`, `span_id` in hex, as the
    /// kernel reads them from a thread context); 0, the empty link, without one.
    fn link(&mut self, labels: &[(String, String)]) -> i32 {
        let id = |key: &str, bytes: usize| {
            let hex = &labels.iter().find(|(k, _)| k == key)?.1;
            let id = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()?;
            (id.len() == bytes).then_some(id)
        };
        let (Some(trace_id), Some(span_id)) = (id(TRACE_ID, 16), id(SPAN_ID, 8)) else {
            return 0;
        };
        let next = self.out.link_table.len() as i32;
        *self
            .links
            .entry((trace_id.clone(), span_id.clone()))
            .or_insert_with(|| {
                self.out.link_table.push(pb::Link { trace_id, span_id });
                next
            })
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.out.string_table.len() as i32;
        self.out.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn attribute(&mut self, key: &str, value: AttrValue) -> i32 {
        let key = self.string(key);
        if let Some(&i) = self.attributes.get(&(key, value.clone())) {
            return i;
        }
        let any = match &value {
            AttrValue::Str(s) => common::any_value::Value::StringValue(s.clone()),
            AttrValue::Int(n) => common::any_value::Value::IntValue(*n),
        };
        let i = self.out.attribute_table.len() as i32;
        self.out.attribute_table.push(pb::KeyValueAndUnit {
            key_strindex: key,
            value: Some(common::AnyValue { value: Some(any) }),
            unit_strindex: 0,
        });
        self.attributes.insert((key, value), i);
        i
    }

    fn mapping(&mut self, module: &Arc<Module>) -> i32 {
        if let Some(&i) = self.mappings.get(module) {
            return i;
        }
        let filename_strindex = self.string(&module.path);
        let attribute_indices = match &module.build_id {
            Some(id) => vec![self.attribute(
                "process.executable.build_id.gnu",
                AttrValue::Str(id.clone()),
            )],
            None => Vec::new(),
        };
        let i = self.out.mapping_table.len() as i32;
        self.out.mapping_table.push(pb::Mapping {
            memory_start: module.start,
            memory_limit: module.limit,
            file_offset: module.file_offset,
            filename_strindex,
            attribute_indices,
        });
        self.mappings.insert(module.clone(), i);
        i
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> i32 {
        let name = self.string(name);
        let file = self.string(file.unwrap_or(""));
        if let Some(&i) = self.functions.get(&(name, file)) {
            return i;
        }
        let i = self.out.function_table.len() as i32;
        self.out.function_table.push(pb::Function {
            name_strindex: name,
            system_name_strindex: name,
            filename_strindex: file,
            start_line: 0,
        });
        self.functions.insert((name, file), i);
        i
    }

    fn location(&mut self, frame: &Frame) -> i32 {
        let mapping = frame.module.as_ref().map(|m| self.mapping(m)).unwrap_or(0);
        // Markers have no address: key them by their name so different markers stay apart.
        let marker = if frame.kind == FrameKind::Marker {
            self.string(&frame.display_name())
        } else {
            0
        };
        let key = (
            mapping,
            frame.address,
            frame.return_address,
            frame.kind,
            marker,
        );
        if let Some(&i) = self.locations.get(&key) {
            return i;
        }
        let mut lines: Vec<pb::Line> = frame
            .symbols
            .iter()
            .map(|s| pb::Line {
                function_index: self.function(&s.name, s.file.as_deref()),
                line: s.line.map(i64::from).unwrap_or(0),
                column: 0,
            })
            .collect();
        if lines.is_empty() && frame.kind == FrameKind::Marker {
            lines.push(pb::Line {
                function_index: self.function(&frame.display_name(), None),
                line: 0,
                column: 0,
            });
        }
        let frame_type = match frame.kind {
            FrameKind::Kernel => "kernel",
            FrameKind::User => "native",
            FrameKind::Marker => "abort-marker",
        };
        let attribute_indices =
            vec![self.attribute("profile.frame.type", AttrValue::Str(frame_type.to_owned()))];
        let i = self.out.location_table.len() as i32;
        self.out.location_table.push(pb::Location {
            mapping_index: mapping,
            address: frame.address,
            lines,
            attribute_indices,
        });
        self.locations.insert(key, i);
        i
    }

    fn stack(&mut self, frames: &[Frame]) -> i32 {
        let locations: Vec<i32> = frames.iter().map(|f| self.location(f)).collect();
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = self.out.stack_table.len() as i32;
        self.out.stack_table.push(pb::Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, i);
        i
    }

    /// One OTLP profile per value type of `part`'s profile.
    fn profiles(&mut self, part: &Part<'_>) -> Vec<pb::Profile> {
        let profile = part.profile;
        let samples = &profile.samples[part.samples.clone()];
        let mut shared: Vec<(i32, Vec<i32>, i32)> = Vec::with_capacity(samples.len());
        for s in samples {
            let stack = self.stack(&s.frames);
            let mut attrs = vec![
                self.attribute("thread.name", AttrValue::Str(s.comm.clone())),
                self.attribute("thread.id", AttrValue::Int(i64::from(s.tid))),
                self.attribute(keys::PROCESS_PID, AttrValue::Int(i64::from(s.pid))),
            ];
            // The span a sample ran in is its link (OTLP's own place for it), not attributes.
            let link = self.link(&s.labels);
            // The process's own labels (Go's pprof labels, a span's attributes), under their own
            // keys.
            for (key, value) in s.labels.iter() {
                if link != 0 && (key == TRACE_ID || key == SPAN_ID) {
                    continue;
                }
                attrs.push(self.attribute(key, AttrValue::Str(value.clone())));
            }
            shared.push((stack, attrs, link));
        }
        let (pt, pu) = profile.kind.period_type();
        let period_type = pb::ValueType {
            type_strindex: self.string(pt),
            unit_strindex: self.string(pu),
        };
        let mut out = Vec::new();
        for (index, (ty, unit)) in profile.kind.sample_types().iter().enumerate() {
            let sample_type = pb::ValueType {
                type_strindex: self.string(ty),
                unit_strindex: self.string(unit),
            };
            let samples = samples
                .iter()
                .zip(&shared)
                .filter_map(|(s, (stack, attrs, link))| {
                    let value = s.values.get(index).copied().unwrap_or(0);
                    (value != 0).then(|| pb::Sample {
                        stack_index: *stack,
                        attribute_indices: attrs.clone(),
                        link_index: *link,
                        values: vec![value],
                        timestamps_unix_nano: Vec::new(),
                    })
                })
                .collect();
            out.push(pb::Profile {
                sample_type: Some(sample_type),
                samples,
                time_unix_nano: profile.time_nanos.max(0) as u64,
                duration_nano: profile.duration_nanos.max(0) as u64,
                period_type: Some(period_type),
                period: profile.period,
                profile_id: profile_id(),
                ..Default::default()
            });
        }
        out
    }
}

/// 16 random bytes, never all zero (the spec treats that as "no id").
fn profile_id() -> Vec<u8> {
    let mut id = fastrand::u128(1..).to_le_bytes().to_vec();
    id.truncate(16);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_window_still_sends_the_heartbeat_with_typed_values() {
        let mut heartbeat = Tags::new();
        heartbeat.insert(keys::HOST_NAME, "node-1");
        heartbeat.insert("sonde.window.samples", "0");
        heartbeat.insert("sonde.coverage.symbolized_frame_ratio", "0.9500");
        let batch = Batch {
            heartbeat,
            ..Default::default()
        };
        let requests = encode_batch(&batch, 4 << 20);
        assert_eq!(requests.len(), 1);
        let resource = requests[0].resource_profiles[0].resource.as_ref().unwrap();
        let value = |k: &str| {
            resource
                .attributes
                .iter()
                .find(|kv| kv.key == k)
                .and_then(|kv| kv.value.clone())
                .and_then(|v| v.value)
        };
        use common::any_value::Value;
        assert_eq!(
            value("host.name"),
            Some(Value::StringValue("node-1".into()))
        );
        assert_eq!(value("sonde.window.samples"), Some(Value::IntValue(0)));
        assert_eq!(
            value("sonde.coverage.symbolized_frame_ratio"),
            Some(Value::DoubleValue(0.95))
        );
        assert!(encode_batch(&Batch::default(), 4 << 20).is_empty());
    }

    #[test]
    fn a_span_is_the_samples_link_once_per_span() {
        let mut d = Dictionary::new();
        let span = |trace: &str, span: &str| {
            vec![
                (TRACE_ID.to_owned(), trace.to_owned()),
                (SPAN_ID.to_owned(), span.to_owned()),
            ]
        };
        let trace = "0af7651916cd43dd8448eb211c80319c";
        assert_eq!(d.link(&span(trace, "b7ad6b7169203331")), 1);
        assert_eq!(d.link(&span(trace, "b7ad6b7169203331")), 1);
        assert_eq!(d.link(&span(trace, "00f067aa0ba902b7")), 2);
        assert_eq!(
            d.out.link_table[1].span_id,
            [0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
        );
        assert_eq!(d.out.link_table[1].trace_id.len(), 16);
        // Not a span: labels that are not ids of the right length, or no labels.
        assert_eq!(d.link(&span("0af7", "b7ad6b7169203331")), 0);
        assert_eq!(d.link(&span(trace, "not hex!")), 0);
        assert_eq!(d.link(&[]), 0);
    }
}
