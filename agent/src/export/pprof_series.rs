//! What the pprof-push backends (Pyroscope, Parca) take of a window: one series per workload and
//! profile type, its labels ([`crate::remote::labels`]) and one gzip pprof, packed into requests
//! under a size bound.

use crate::{export::Batch, profile::pprof, remote::labels};

/// Largest request before the series are split over several (gRPC servers refuse 4 MiB by default).
pub(crate) const MAX_REQUEST_BYTES: usize = 4 << 20;

/// One workload's profile of one type.
pub(crate) struct Series {
    /// Labels, sorted by name, each once.
    pub(crate) labels: Vec<(String, String)>,
    /// The profile as gzip pprof.
    pub(crate) raw_profile: Vec<u8>,
}

/// The series of `batch`; profiles without samples are left out (a heartbeat-only window has none).
pub(crate) fn series(batch: &Batch) -> Vec<Series> {
    batch
        .profiles
        .iter()
        .filter(|(_, p)| !p.samples.is_empty())
        .map(|(tags, profile)| Series {
            labels: labels::series_labels(profile.kind, tags),
            raw_profile: pprof::encode_gzip(profile),
        })
        .collect()
}

/// `items` in groups whose `size` adds up to at most `max` (an item larger than `max` goes alone).
pub(crate) fn pack<T>(items: Vec<T>, max: usize, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    let mut used = 0;
    for item in items {
        let n = size(&item);
        match out.last_mut() {
            Some(group) if used + n <= max => group.push(item),
            _ => {
                out.push(vec![item]);
                used = 0;
            }
        }
        used += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_under_the_bound() {
        let groups = pack(vec![3, 3, 3, 9, 1], 6, |n| *n);
        assert_eq!(groups, vec![vec![3, 3], vec![3], vec![9], vec![1]]);
        assert!(pack(Vec::<usize>::new(), 6, |n| *n).is_empty());
    }
}
