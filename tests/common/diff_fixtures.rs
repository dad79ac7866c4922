//! Synthetic gzip pprof files for the `sonde diff` tests, built with sonde's generated pprof types, and a
//! helper that runs the real `sonde` binary.
//!
//! Stacks are written root first, `;`-separated, like folded stacks. A frame `inner<outer` is one location
//! whose inline chain is `[inner, outer]` (inner inlined into outer); a frame `0x1234` is an unsymbolized
//! location in the mapping `/usr/lib/libapp.so`.
#![allow(dead_code)]

use std::{
    collections::HashMap,
    io::Write as _,
    path::{Path, PathBuf},
    process::Output,
};

use flate2::{Compression, write::GzEncoder};
use prost::Message as _;
use sonde::profile::pprof::proto;

/// Nanoseconds per sample at 100 Hz.
pub const PERIOD: i64 = 10_000_000;

/// One stack and how many samples landed in it.
#[derive(Clone, Debug)]
pub struct Stack {
    /// Frames, root first, `;`-separated.
    pub frames: String,
    /// Samples.
    pub samples: i64,
    /// Labelled `truncated=1`, as sonde marks stacks that missed the thread entry point.
    pub truncated: bool,
    /// Its other labels (a span's `span_name`, Go's pprof labels).
    pub labels: Vec<(String, String)>,
}

/// A stack of `samples` samples.
pub fn stack(frames: &str, samples: i64) -> Stack {
    Stack {
        frames: frames.to_owned(),
        samples,
        truncated: false,
        labels: Vec::new(),
    }
}

impl Stack {
    /// Marks the stack truncated.
    pub fn truncated(mut self) -> Self {
        self.truncated = true;
        self
    }

    /// Labels the stack's samples `key=value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.to_owned(), value.to_owned()));
        self
    }
}

/// What a synthetic profile measures.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `samples/count`, `cpu/nanoseconds` (as `sonde record` writes).
    Cpu,
    /// `offcpu/nanoseconds`, `events/count`.
    OffCpu,
    /// `cpu/nanoseconds` only: the sample count must be estimated as value / period.
    CpuNanosOnly,
    /// A sampled off-CPU profile as `sonde record` writes it: `offcpu/nanoseconds` and `events/count`
    /// estimated from tracked episodes weighted by the inverse probability (here the same for all),
    /// `tracked/count` the episodes behind them. A stack's `samples` are the tracked episodes.
    OffCpuSampled { one_in: i64 },
}

/// A `ValueType`; `type` is set through its field number because its Rust name (`ty` here, `r#type` with
/// upstream prost naming) depends on the code generator's configuration.
fn value_type(b: &mut Strings, ty: &str, unit: &str) -> proto::ValueType {
    let mut v = proto::ValueType {
        unit: b.get(unit),
        ..Default::default()
    };
    let mut field = vec![0x08];
    prost::encoding::encode_varint(b.get(ty) as u64, &mut field);
    v.merge(field.as_slice()).expect("a varint field");
    v
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), self.table.len() as i64 - 1);
        self.table.len() as i64 - 1
    }
}

/// Builds a pprof message of `kind` lasting `duration_secs` with the given stacks.
pub fn profile(kind: Kind, duration_secs: f64, stacks: &[Stack]) -> proto::Profile {
    let mut s = Strings::default();
    s.get("");
    let mut p = proto::Profile::default();
    let types: &[(&str, &str)] = match kind {
        Kind::Cpu => &[("samples", "count"), ("cpu", "nanoseconds")],
        Kind::OffCpu => &[("offcpu", "nanoseconds"), ("events", "count")],
        Kind::CpuNanosOnly => &[("cpu", "nanoseconds")],
        Kind::OffCpuSampled { .. } => &[
            ("offcpu", "nanoseconds"),
            ("events", "count"),
            ("tracked", "count"),
        ],
    };
    let weight = match kind {
        Kind::OffCpuSampled { one_in } => one_in,
        _ => 1,
    };
    p.sample_type = types
        .iter()
        .map(|(t, u)| value_type(&mut s, t, u))
        .collect();
    p.period_type = Some(value_type(&mut s, types[0].0, "nanoseconds"));
    p.period = PERIOD;
    p.time_nanos = 1_767_225_600_000_000_000;
    p.duration_nanos = (duration_secs * 1e9) as i64;
    let filename = s.get("/usr/lib/libapp.so");
    p.mapping.push(proto::Mapping {
        id: 1,
        memory_start: 0x1000,
        memory_limit: 0x100000,
        file_offset: 0,
        filename,
        ..Default::default()
    });
    let mut functions: HashMap<String, u64> = HashMap::new();
    let mut locations: HashMap<String, u64> = HashMap::new();
    let (truncated, one) = (s.get("truncated"), s.get("1"));
    for st in stacks {
        let mut ids = Vec::new();
        // pprof samples list locations leaf first.
        for frame in st.frames.split(';').rev() {
            let next = locations.len() as u64 + 1;
            let id = *locations.entry(frame.to_owned()).or_insert(next);
            if id == next {
                let (address, line) = match frame.strip_prefix("0x") {
                    Some(hex) => (0x1000 + u64::from_str_radix(hex, 16).unwrap(), Vec::new()),
                    None => {
                        let line = frame
                            .split('<')
                            .map(|name| {
                                let next = functions.len() as u64 + 1;
                                let fid = *functions.entry(name.to_owned()).or_insert(next);
                                if fid == next {
                                    let name = s.get(name);
                                    p.function.push(proto::Function {
                                        id: fid,
                                        name,
                                        system_name: name,
                                        ..Default::default()
                                    });
                                }
                                proto::Line {
                                    function_id: fid,
                                    line: 1,
                                }
                            })
                            .collect();
                        (0x2000 + id * 16, line)
                    }
                };
                p.location.push(proto::Location {
                    id,
                    mapping_id: 1,
                    address,
                    line,
                    is_folded: false,
                });
            }
            ids.push(id);
        }
        let values = types
            .iter()
            .map(|&(t, u)| match (t, u) {
                ("tracked", _) => st.samples,
                (_, "count") => st.samples * weight,
                _ => st.samples * PERIOD * weight,
            })
            .collect();
        let mut label = if st.truncated {
            vec![proto::Label {
                key: truncated,
                str: one,
                ..Default::default()
            }]
        } else {
            Vec::new()
        };
        for (key, value) in &st.labels {
            label.push(proto::Label {
                key: s.get(key),
                str: s.get(value),
                ..Default::default()
            });
        }
        p.sample.push(proto::Sample {
            location_id: ids,
            value: values,
            label,
        });
    }
    p.string_table = s.table;
    p
}

/// Gzip-compresses `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// Writes `profile` as a gzip pprof at `path`.
pub fn write(path: &Path, profile: &proto::Profile) -> PathBuf {
    std::fs::write(path, gzip(&profile.encode_to_vec())).unwrap();
    path.to_owned()
}

/// A fresh, empty directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("diff")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `sonde diff` with `args`.
pub fn sonde_diff<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sonde"))
        .arg("diff")
        .args(args)
        .output()
        .expect("running sonde")
}

/// Runs `sonde diff ... --format json`, asserts success and parses stdout.
pub fn diff_json<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> (serde_json::Value, String) {
    let mut all: Vec<std::ffi::OsString> =
        args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    all.extend(["--format".into(), "json".into()]);
    let out = sonde_diff(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sonde diff {all:?} failed: {stderr}");
    (
        serde_json::from_slice(&out.stdout).expect("stdout is JSON"),
        stderr,
    )
}

/// The row of `function` in a JSON diff, and its rank (0 = first).
pub fn row<'a>(json: &'a serde_json::Value, function: &str) -> (usize, &'a serde_json::Value) {
    json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .find(|(_, r)| r["function"] == function)
        .unwrap_or_else(|| panic!("no row for {function} in {json}"))
}

/// `row[field]` as f64.
pub fn num(row: &serde_json::Value, field: &str) -> f64 {
    row[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {row}"))
}
