//! Wire size of a batch two ways, for the benchmarks: OTLP (one request per window with a shared dictionary,
//! gzip) against one gzip pprof per profile (the Pyroscope style of ingestion).

use super::{Batch, otlp::encode};
use crate::profile::pprof;

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
    let requests = encode::encode_batch(batch, encode::DEFAULT_MAX_REQUEST_BYTES);
    let mut sizes = WireSizes {
        otlp_requests: requests.len(),
        samples: batch.sample_count(),
        ..Default::default()
    };
    for request in &requests {
        let bytes = prost::Message::encode_to_vec(request);
        sizes.otlp_encoded_bytes += bytes.len();
        sizes.otlp_gzip_bytes += gzip_len(&bytes);
    }
    for (tags, profile) in &batch.profiles {
        sizes.pprof_files += 1;
        sizes.pprof_gzip_bytes += pprof::encode_gzip_tagged(profile, tags.iter()).len();
    }
    sizes
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
    }
}
