//! A workload's tags as the label set of a Pyroscope or Parca series.
//!
//! Both backends take Prometheus-style labels: names match `[a-zA-Z_][a-zA-Z0-9_]*`, `__`-prefixed names
//! are the backend's own, and a name appears once per series. The rules (the README's label table):
//! - `__name__` is the profile type's name: [`CPU_NAME`] for on-CPU (Pyroscope's eBPF convention, what
//!   Alloy's `pyroscope.ebpf` sends), [`OFF_CPU_NAME`] for off-CPU;
//! - `service_name` is `service.name`, else the executable's name, else `unknown_service` (Pyroscope's
//!   own fallback);
//! - every other tag keeps its value under its name with each character outside `[a-zA-Z0-9_]` turned
//!   into `_` (`host.name` → `host_name`), a leading digit or a `__` prefix given one `_` only;
//! - empty values are left out; when two tags map to one name, the first in tag order is kept.

use crate::{
    metadata::{Tags, keys},
    profile::model::ProfileKind,
};

/// `__name__` of on-CPU profiles.
pub const CPU_NAME: &str = "process_cpu";
/// `__name__` of off-CPU profiles.
pub const OFF_CPU_NAME: &str = "off_cpu";
/// The label Pyroscope groups applications by.
pub const SERVICE_NAME: &str = "service_name";

/// `__name__` of a profile of `kind`.
pub fn profile_name(kind: ProfileKind) -> &'static str {
    match kind {
        ProfileKind::Cpu => CPU_NAME,
        ProfileKind::OffCpu => OFF_CPU_NAME,
    }
}

/// The label set of a profile of `kind` of the workload `tags`, sorted by name, each name once.
pub fn series_labels(kind: ProfileKind, tags: &Tags) -> Vec<(String, String)> {
    let service = tags
        .get(keys::SERVICE_NAME)
        .or_else(|| tags.get(keys::PROCESS_EXECUTABLE_NAME))
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown_service");
    let mut labels = vec![
        ("__name__".to_owned(), profile_name(kind).to_owned()),
        (SERVICE_NAME.to_owned(), service.to_owned()),
    ];
    for (key, value) in tags.iter() {
        if key == keys::SERVICE_NAME || value.is_empty() {
            continue;
        }
        let name = label_name(key);
        if labels.iter().all(|(n, _)| *n != name) {
            labels.push((name, value.to_owned()));
        }
    }
    labels.sort();
    labels
}

/// `key` as a valid label name that is never one of the backend's `__` names.
pub fn label_name(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    while name.starts_with("__") {
        name.remove(0);
    }
    name
}

/// Whether `name` is a valid label name.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_become_valid_unique_labels() {
        let mut tags = Tags::new();
        tags.insert("host.name", "node-1");
        tags.insert("host_name", "shadowed");
        tags.insert("k8s.pod.name", "checkout-7d9");
        tags.insert("service.name", "checkout");
        tags.insert("service.version", "2.4");
        tags.insert("2fa", "x");
        tags.insert("__name__", "forged");
        tags.insert("empty", "");
        let labels = series_labels(ProfileKind::Cpu, &tags);
        let get = |n: &str| labels.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("__name__"), Some("process_cpu"));
        assert_eq!(get("service_name"), Some("checkout"));
        assert_eq!(get("host_name"), Some("node-1"));
        assert_eq!(get("k8s_pod_name"), Some("checkout-7d9"));
        assert_eq!(get("service_version"), Some("2.4"));
        assert_eq!(get("_2fa"), Some("x"));
        assert_eq!(get("_name__"), Some("forged"));
        assert_eq!(get("empty"), None);
        let mut names: Vec<_> = labels.iter().map(|(k, _)| k.clone()).collect();
        names.dedup();
        assert_eq!(names.len(), labels.len(), "{labels:?}");
        assert!(names.iter().all(|n| is_valid_name(n)), "{names:?}");
    }

    #[test]
    fn service_name_falls_back_to_the_executable() {
        let mut tags = Tags::new();
        tags.insert("process.executable.name", "burner");
        let labels = series_labels(ProfileKind::OffCpu, &tags);
        assert!(labels.contains(&("service_name".into(), "burner".into())));
        assert!(labels.contains(&("__name__".into(), "off_cpu".into())));
        let labels = series_labels(ProfileKind::Cpu, &Tags::new());
        assert!(labels.contains(&("service_name".into(), "unknown_service".into())));
    }
}
