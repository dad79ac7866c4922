//! Decides, from the index alone, which windows merge into hourly profiles, which hourly profiles
//! expire, and what the byte cap removes. No I/O: [`super::apply`] carries the plan out.

use std::collections::HashMap;

use super::Policy;
use crate::{
    datadir::{HOURLY_DIR, IndexEntry},
    metadata::keys,
    profile::model::ProfileKind,
};

/// Windows of one process identity, kind and hour, to become one hourly profile.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Merge {
    /// Start of the hour, Unix seconds.
    pub(crate) hour_start_secs: i64,
    /// Index positions of the members: windows, and an earlier hourly profile of the same hour.
    pub(crate) members: Vec<usize>,
}

/// The tier decisions.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TierPlan {
    pub(crate) merges: Vec<Merge>,
    /// Hourly profiles past `hourly`, and past `per_release` or not among their release's last N.
    pub(crate) expired: Vec<usize>,
    /// When the next decision can change (Unix nanoseconds): nothing need run before it.
    pub(crate) next_due_nanos: i64,
}

fn is_hourly(e: &IndexEntry) -> bool {
    e.path.starts_with(HOURLY_DIR) && e.path[HOURLY_DIR.len()..].starts_with('/')
}

/// What one profile is of: the same process identity, kind and tags.
fn identity(e: &IndexEntry) -> (ProfileKind, String) {
    let tags = serde_json::to_string(&e.tags).expect("tags serialize");
    (e.kind, tags)
}

/// Plans the tiers of `entries` at `now` (Unix nanoseconds).
pub(crate) fn plan_tiers(entries: &[IndexEntry], policy: &Policy, now: i64) -> TierPlan {
    let hour = policy.hour.as_nanos() as i64;
    let recent = policy.recent.as_nanos() as i64;
    let hourly = policy.hourly.as_nanos() as i64;
    let per_release = policy.per_release.as_nanos() as i64;
    let mut next_due = now.saturating_add(hour);

    // Windows whose whole hour is older than `recent` merge, with any hourly profile of that hour.
    let mut groups: HashMap<(i64, (ProfileKind, String)), Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let bucket = e.start_unix_nanos.div_euclid(hour);
        if is_hourly(e) {
            groups.entry((bucket, identity(e))).or_default().push(i);
            continue;
        }
        let due = (bucket + 1).saturating_mul(hour).saturating_add(recent);
        if due <= now {
            groups.entry((bucket, identity(e))).or_default().push(i);
        } else {
            next_due = next_due.min(due);
        }
    }
    let mut merges: Vec<Merge> = groups
        .into_iter()
        .filter(|(_, members)| members.iter().any(|&i| !is_hourly(&entries[i])))
        .map(|((bucket, _), mut members)| {
            members.sort_unstable();
            Merge {
                hour_start_secs: bucket * (hour / 1_000_000_000).max(1),
                members,
            }
        })
        .collect();
    merges.sort_by_key(|m| m.members[0]);

    // Hourly profiles: ranked newest first within their release (service and version and kind).
    let mut releases: HashMap<(String, String, ProfileKind), Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate().filter(|(_, e)| is_hourly(e)) {
        let tag = |k| e.tags.get(k).unwrap_or("").to_owned();
        releases
            .entry((tag(keys::SERVICE_NAME), tag(keys::SERVICE_VERSION), e.kind))
            .or_default()
            .push(i);
    }
    let mut expired = Vec::new();
    for members in releases.values_mut() {
        members.sort_by_key(|&i| std::cmp::Reverse(entries[i].end_unix_nanos));
        for (rank, &i) in members.iter().enumerate() {
            let end = entries[i].end_unix_nanos;
            let kept_for_release = rank < policy.per_release_keep;
            let until = if kept_for_release {
                end.saturating_add(hourly.max(per_release))
            } else {
                end.saturating_add(hourly)
            };
            if until <= now {
                expired.push(i);
            } else {
                next_due = next_due.min(until);
            }
        }
    }
    expired.sort_unstable();
    TierPlan {
        merges,
        expired,
        next_due_nanos: next_due,
    }
}

/// The entries the byte cap removes: whole files (a window's pack goes with all its profiles), the
/// file whose newest profile ends first going first, until what is left fits in `max_bytes`.
/// `sizes` are the entries' shares of their files.
pub(crate) fn plan_cap(entries: &[IndexEntry], sizes: &[u64], max_bytes: u64) -> Vec<usize> {
    let mut total: u64 = sizes.iter().sum();
    // Per file: (newest end, first entry, bytes, entries).
    let mut files: HashMap<&str, (i64, usize, u64, Vec<usize>)> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let file = files.entry(&e.path).or_insert((i64::MIN, i, 0, Vec::new()));
        file.0 = file.0.max(e.end_unix_nanos);
        file.2 += sizes[i];
        file.3.push(i);
    }
    let mut order: Vec<_> = files.into_values().collect();
    order.sort_by_key(|&(end, first, ..)| (end, first));
    let mut out = Vec::new();
    for (_, _, bytes, members) in order {
        if total <= max_bytes {
            break;
        }
        total = total.saturating_sub(bytes);
        out.extend(members);
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const S: i64 = 1_000_000_000;

    fn entry(path: &str, version: &str, start_s: i64, end_s: i64) -> IndexEntry {
        IndexEntry {
            path: path.into(),
            offset: None,
            length: None,
            kind: ProfileKind::Cpu,
            start_unix_nanos: start_s * S,
            end_unix_nanos: end_s * S,
            tags: std::sync::Arc::new(
                [("service.name", "cart"), ("service.version", version)]
                    .into_iter()
                    .collect(),
            ),
        }
    }

    /// Hours of 10 s; windows kept 20 s, hourly 60 s, the last 2 of a release 300 s.
    fn policy() -> Policy {
        Policy {
            hour: Duration::from_secs(10),
            recent: Duration::from_secs(20),
            hourly: Duration::from_secs(60),
            per_release: Duration::from_secs(300),
            per_release_keep: 2,
            max_bytes: u64::MAX,
        }
    }

    #[test]
    fn windows_merge_per_hour_once_the_hour_is_past_recent() {
        let entries = vec![
            entry("profiles/100/a.pb.gz", "1", 100, 101),
            entry("profiles/105/a.pb.gz", "1", 105, 106),
            entry("profiles/111/a.pb.gz", "1", 111, 112),
            entry("profiles/105/b.pb.gz", "2", 105, 106),
        ];
        // At 125 the hour [100, 110) is 15 s old: kept. At 130 it merges, per identity.
        let early = plan_tiers(&entries, &policy(), 125 * S);
        assert!(early.merges.is_empty());
        assert_eq!(early.next_due_nanos, 130 * S);
        let plan = plan_tiers(&entries, &policy(), 130 * S);
        assert_eq!(
            plan.merges,
            vec![
                Merge {
                    hour_start_secs: 100,
                    members: vec![0, 1]
                },
                Merge {
                    hour_start_secs: 100,
                    members: vec![3]
                },
            ]
        );
        assert_eq!(plan.next_due_nanos, 140 * S, "the next hour's turn");
    }

    #[test]
    fn the_last_hourly_profiles_of_a_release_outlive_hourly() {
        let entries = vec![
            entry("hourly/0/a.pb.gz", "1", 0, 10),
            entry("hourly/10/a.pb.gz", "1", 10, 20),
            entry("hourly/20/a.pb.gz", "1", 20, 30),
            entry("hourly/400/a.pb.gz", "2", 400, 410),
        ];
        // At 100 every version-1 profile is past hourly (60 s); its last two are kept for the release.
        let plan = plan_tiers(&entries, &policy(), 100 * S);
        assert_eq!(plan.expired, vec![0]);
        // At 330 the release's 300 s are over for the one ending at 20, not for the one ending at 30.
        assert_eq!(plan_tiers(&entries, &policy(), 325 * S).expired, vec![0, 1]);
        assert_eq!(
            plan_tiers(&entries, &policy(), 331 * S).expired,
            vec![0, 1, 2]
        );
    }

    #[test]
    fn the_cap_removes_the_oldest_first() {
        let entries = vec![
            entry("profiles/3/a.pb.gz", "1", 3, 4),
            entry("profiles/1/a.pb.gz", "1", 1, 2),
            entry("profiles/2/a.pb.gz", "1", 2, 3),
        ];
        assert_eq!(plan_cap(&entries, &[10, 10, 10], 30), Vec::<usize>::new());
        assert_eq!(plan_cap(&entries, &[10, 10, 10], 15), vec![1, 2]);
        assert_eq!(plan_cap(&entries, &[10, 10, 10], 0), vec![0, 1, 2]);
        // A pack goes whole: the oldest file holds two profiles, so removing it frees both.
        let mut packed = entries.clone();
        packed[2].path = packed[1].path.clone();
        assert_eq!(plan_cap(&packed, &[10, 10, 10], 25), vec![1, 2]);
        assert_eq!(plan_cap(&packed, &[10, 10, 10], 5), vec![0, 1, 2]);
    }
}
