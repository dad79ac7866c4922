//! Wire size of a batch two ways, for the benchmarks: OTLP (one request per window with a shared dictionary,
//! gzip) against one gzip pprof per profile (the Pyroscope style of ingestion).

use std::collections::{HashMap, hash_map::Entry};

use super::{Batch, otlp::encode};
use crate::profile::{Frame, Labels, Profile, StackSample, pprof};

/// Bytes a batch costs on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireSizes {
    /// OTLP requests the batch becomes.
    pub otlp_requests: usize,
    /// Sum of the OTLP request bodies before compression.
    pub otlp_encoded_bytes: usize,
    /// Sum of the OTLP request bodies after gzip.
    pub otlp_gzip_bytes: usize,
    /// Gzip pprof files the batch becomes (one per profile).
    pub pprof_files: usize,
    /// Sum of the gzip pprof files (tags as comments included).
    pub pprof_gzip_bytes: usize,
    /// Samples (aggregated stacks) in the batch.
    pub samples: usize,
    /// OTLP gzip bytes of the same batch with each process's threads merged into one series per
    /// stack: what per-thread samples (`thread.id`, `thread.name`) cost on the wire.
    pub otlp_gzip_bytes_threads_merged: usize,
}

impl WireSizes {
    /// OTLP gzip bytes per sample (0 for an empty batch).
    pub fn otlp_bytes_per_sample(&self) -> f64 {
        self.otlp_gzip_bytes as f64 / self.samples.max(1) as f64
    }

    /// pprof gzip bytes per sample (0 for an empty batch).
    pub fn pprof_bytes_per_sample(&self) -> f64 {
        self.pprof_gzip_bytes as f64 / self.samples.max(1) as f64
    }
}

/// Measures `batch` both ways with the default request size limit.
pub fn wire_sizes(batch: &Batch) -> WireSizes {
    let (otlp_requests, otlp_encoded_bytes, otlp_gzip_bytes) = otlp_sizes(batch);
    let mut sizes = WireSizes {
        otlp_requests,
        otlp_encoded_bytes,
        otlp_gzip_bytes,
        samples: batch.sample_count(),
        otlp_gzip_bytes_threads_merged: otlp_sizes(&threads_merged(batch)).2,
        ..Default::default()
    };
    for (tags, profile) in &batch.profiles {
        sizes.pprof_files += 1;
        sizes.pprof_gzip_bytes += pprof::encode_gzip_tagged(profile, tags.iter()).len();
    }
    sizes
}

/// Requests, encoded bytes and gzip bytes of `batch` as OTLP.
fn otlp_sizes(batch: &Batch) -> (usize, usize, usize) {
    let requests = encode::encode_batch(batch, encode::DEFAULT_MAX_REQUEST_BYTES);
    let (mut encoded, mut gzip) = (0, 0);
    for request in &requests {
        let bytes = prost::Message::encode_to_vec(request);
        encoded += bytes.len();
        gzip += gzip_len(&bytes);
    }
    (requests.len(), encoded, gzip)
}

/// `batch` with the samples of each process's threads summed into one per stack and label set,
/// under the process's id and the name of its first thread seen.
fn threads_merged(batch: &Batch) -> Batch {
    let profiles = batch
        .profiles
        .iter()
        .map(|(tags, profile)| {
            let mut merged: Vec<StackSample> = Vec::new();
            let mut at: HashMap<(u32, &[Frame], &Labels), usize> = HashMap::new();
            for s in &profile.samples {
                match at.entry((s.pid, &s.frames, &s.labels)) {
                    Entry::Occupied(e) => {
                        let into = &mut merged[*e.get()];
                        for (v, add) in into.values.iter_mut().zip(&s.values) {
                            *v += add;
                        }
                    }
                    Entry::Vacant(e) => {
                        e.insert(merged.len());
                        merged.push(StackSample {
                            tid: s.pid,
                            ..s.clone()
                        });
                    }
                }
            }
            let profile = Profile {
                samples: merged,
                ..profile.clone()
            };
            (tags.clone(), profile)
        })
        .collect();
    Batch {
        profiles,
        heartbeat: batch.heartbeat.clone(),
        ..*batch
    }
}

fn gzip_len(bytes: &[u8]) -> usize {
    crate::profile::gzip::compress(bytes).len()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::profile::{Frame, FrameKind, Profile, ProfileKind, StackSample, Symbol};

    fn batch(workloads: usize) -> Batch {
        let frame = |name: &str, address| Frame {
            address,
            kind: FrameKind::User,
            return_address: false,
            module: None,
            symbols: Arc::from(vec![Symbol {
                name: name.into(),
                file: None,
                line: None,
            }]),
        };
        let profiles = (0..workloads)
            .map(|w| {
                let samples = (0..50u64)
                    .map(|i| StackSample {
                        pid: 1,
                        tid: 1,
                        comm: "app".into(),
                        frames: vec![frame(&format!("leaf_{i}"), 0x1000 + i), frame("main", 0x10)],
                        values: vec![1, 10_000_000],
                        truncated: false,
                        labels: Default::default(),
                    })
                    .collect();
                let tags = std::sync::Arc::new(
                    [("service.name", format!("svc-{w}"))].into_iter().collect(),
                );
                let profile = Profile {
                    kind: ProfileKind::Cpu,
                    time_nanos: 0,
                    duration_nanos: 1,
                    period: 1,
                    samples,
                    notes: Vec::new(),
                };
                (tags, profile)
            })
            .collect();
        Batch {
            start_unix_nanos: 0,
            end_unix_nanos: 1,
            profiles,
            ..Default::default()
        }
    }

    #[test]
    fn shared_dictionary_beats_one_pprof_per_profile() {
        let sizes = wire_sizes(&batch(20));
        assert_eq!(sizes.samples, 1000);
        assert_eq!((sizes.otlp_requests, sizes.pprof_files), (1, 20));
        assert!(sizes.otlp_gzip_bytes > 0 && sizes.otlp_gzip_bytes < sizes.otlp_encoded_bytes);
        // 20 workloads share one string/function/stack table in OTLP; pprof repeats it per file.
        assert!(sizes.otlp_gzip_bytes < sizes.pprof_gzip_bytes, "{sizes:?}");
        assert!(sizes.otlp_bytes_per_sample() < sizes.pprof_bytes_per_sample());
        // One thread per process: merging threads changes nothing but the encoder's table order
        // (hash maps), which moves the compressed size by a few bytes.
        let (merged, otlp) = (sizes.otlp_gzip_bytes_threads_merged, sizes.otlp_gzip_bytes);
        assert!(merged.abs_diff(otlp) * 100 <= otlp, "{sizes:?}");
    }

    #[test]
    fn threads_merged_is_one_series_per_stack_of_a_process() {
        let mut b = batch(1);
        let threads: Vec<StackSample> = b.profiles[0]
            .1
            .samples
            .iter()
            .flat_map(|s| {
                (2..6).map(move |tid| StackSample {
                    tid,
                    comm: format!("worker-{tid}"),
                    ..s.clone()
                })
            })
            .collect();
        b.profiles[0].1.samples = threads;
        let merged = threads_merged(&b);
        assert_eq!(merged.profiles[0].1.samples.len(), 50);
        assert!(
            merged.profiles[0]
                .1
                .samples
                .iter()
                .all(|s| s.values[0] == 4)
        );
        let sizes = wire_sizes(&b);
        assert!(
            sizes.otlp_gzip_bytes_threads_merged < sizes.otlp_gzip_bytes,
            "{sizes:?}"
        );
    }
}
