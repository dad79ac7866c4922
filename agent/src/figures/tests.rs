//! The catalogue's own rules: one name per figure, one figure per kernel counter at its index, every
//! shared family declared once with one kind and unit, the README's table in step, and the window
//! arithmetic (increases of cumulative counters, totals, the empty-window rule).

use std::collections::{HashMap, HashSet};

use super::*;
use crate::sampler::Window;

#[test]
fn names_are_unique_and_snake_case() {
    let mut seen = HashSet::new();
    for f in all() {
        let name = f.name();
        assert!(seen.insert(name.clone()), "two figures are named {name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{name}"
        );
        assert!(!f.help.is_empty() && !f.help.contains('\n'), "{name}");
    }
}

#[test]
fn every_kernel_counter_is_one_figure_and_the_catalogues_are_in_index_order() {
    let stats: Vec<u32> = all()
        .filter_map(|f| match f.source {
            Source::Kernel(s) => Some(s),
            _ => None,
        })
        .collect();
    let mut sorted = stats.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..sonde_abi::stat::COUNT).collect::<Vec<_>>(),
        "every kernel counter is declared once, in figures/kernel.rs or with its runtime"
    );
    let indices = |figures: &[Figure]| -> Vec<u32> {
        figures
            .iter()
            .filter_map(|f| match f.source {
                Source::Kernel(s) => Some(s),
                _ => None,
            })
            .collect()
    };
    let kernel = indices(kernel::KERNEL);
    assert!(
        kernel.is_sorted(),
        "figures/kernel.rs is in stat order: {kernel:?}"
    );
}

#[test]
fn shared_families_are_declared_once_with_one_kind_and_unit() {
    let mut families: HashMap<String, (Kind, Unit, usize)> = HashMap::new();
    let mut series = HashSet::new();
    for f in all() {
        for (family, labels) in f.series() {
            assert!(
                series.insert(format!("{family}{labels:?}")),
                "{family}{labels:?} is published twice"
            );
            let entry = families
                .entry(family.clone())
                .or_insert((f.kind, f.unit, 0));
            let kind = |k: Kind| if k == Kind::Counter { 0 } else { 1 };
            assert_eq!(kind(entry.0), kind(f.kind), "{family}: kinds differ");
            assert_eq!(entry.1, f.unit, "{family}: units differ");
            entry.2 += 1;
            if !labels.is_empty() {
                assert!(
                    super::families().any(|(n, _)| *n == family),
                    "{family} is shared: declare its help in FAMILIES"
                );
            }
        }
    }
    for (name, _) in super::families() {
        assert!(
            families.contains_key(*name),
            "{name} is declared but unused"
        );
    }
}

#[test]
fn every_export_counter_is_declared() {
    let metrics = crate::export::ExportMetrics::default();
    for (name, _, _) in metrics.snapshot() {
        assert!(
            live::export_counter(name).is_some(),
            "{name} is not declared in live.rs"
        );
    }
}

/// The README's "Self-metrics" table lists every family `/metrics` publishes, and nothing else.
#[test]
fn the_readme_table_lists_every_family() {
    let readme = include_str!("../../../README.md");
    let start = readme
        .find("<!-- metrics-table")
        .expect("README metrics table");
    let end = readme.find("<!-- end metrics-table -->").unwrap();
    let documented: HashSet<&str> = readme[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let mut published = HashSet::new();
    for f in all() {
        for (family, _) in f.series() {
            let total = if f.kind == Kind::Counter {
                "_total"
            } else {
                ""
            };
            published.insert(format!("{family}{}{total}", f.unit.suffix()));
        }
    }
    published.extend(live::all().iter().map(live::Family::sample));
    for family in live::all() {
        let row = readme[start..end]
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", family.sample())))
            .unwrap_or_default();
        for label in family.labels {
            assert!(
                row.contains(&format!("`{label}`")),
                "{row}: no label {label}"
            );
        }
    }
    let mut missing: Vec<_> = published
        .iter()
        .filter(|n| !documented.contains(n.as_str()))
        .collect();
    missing.sort();
    assert!(missing.is_empty(), "not in the README's table: {missing:?}");
    let mut stale: Vec<_> = documented
        .iter()
        .filter(|n| !published.contains(**n))
        .collect();
    stale.sort();
    assert!(
        stale.is_empty(),
        "in the README's table but not published: {stale:?}"
    );
}

fn window(kernel: &[(u32, u64)], unwind_built: u64) -> Window {
    let mut stats = crate::bpf::drain::WindowStats::default();
    for (i, v) in kernel {
        stats.kernel[*i as usize] = *v;
    }
    Window {
        on_cpu: None,
        off_cpu: None,
        stats,
        exited: Vec::new(),
        runtimes: Default::default(),
        unwind: Some(crate::unwind::UnwindStats {
            tables_built: unwind_built,
            ..Default::default()
        }),
        unsymbolized: Vec::new(),
        debug: Default::default(),
        symbolize: Default::default(),
        capture: Default::default(),
        perf_maps: Default::default(),
        processes_held: 0,
        kernel_cost: Default::default(),
        offcpu: None,
        kernel_features: None,
        targets: Default::default(),
    }
}

#[test]
fn cumulative_counters_report_their_increase_and_totals_add_up() {
    use sonde_abi::stat;
    let mut running = Running::default();
    let w1 = window(&[(stat::WALK_ROOT, 3), (stat::WALK_DEPTH, 1)], 5);
    let f1 = running.window(&Input::new(&w1, &[], Usage::default(), 2));
    let built = |f: &Figures| {
        let i = all().position(|f| f.key == "unwind_tables_built").unwrap();
        (f.window[i].total(), f.totals[i].total())
    };
    assert_eq!(built(&f1), (5.0, 5.0));
    assert_eq!(
        f1.get(
            kernel::KERNEL
                .iter()
                .find(|f| matches!(f.source, Source::Kernel(s) if s == stat::WALK_ROOT))
                .unwrap()
        ),
        3.0
    );
    let walk_root_ratio = all().find(|f| f.key == "walk_root_ratio").unwrap();
    assert_eq!(f1.get(walk_root_ratio), 0.75);
    // The second window: 2 more tables built (7 so far), no walks at all.
    let w2 = window(&[], 7);
    let f2 = running.window(&Input::new(&w2, &[], Usage::default(), 2));
    assert_eq!(built(&f2), (2.0, 7.0));
    // An empty window misses nothing: good shares are 1, defect shares 0.
    assert_eq!(f2.get(walk_root_ratio), 1.0);
    assert_eq!(f2.get(&SYMBOLIZED_FRAME_RATIO), 1.0);
    let truncated = all().find(|f| f.key == "truncated_stack_ratio").unwrap();
    assert_eq!(f2.get(truncated), 0.0);
    // The JSON form has every figure by name.
    let json = f2.json();
    assert_eq!(json["unwind_tables_built"], 2.0);
    assert_eq!(json.len(), all().count());
}

#[test]
fn the_heartbeat_keeps_its_attribute_names_and_types() {
    let w = window(&[], 0);
    let f = Running::default().window(&Input::new(&w, &[], Usage::default(), 1));
    let tags = heartbeat("node-1", &f);
    assert_eq!(tags.get("sonde.window.samples"), Some("0"));
    assert_eq!(
        tags.get("sonde.coverage.symbolized_frame_ratio"),
        Some("1.0000")
    );
    assert_eq!(tags.get("sonde.overhead.cpu_ratio"), Some("0.000000"));
    for attribute in [
        "sonde.window.lost_samples",
        "sonde.window.processes_seen",
        "sonde.window.processes_sampled",
        "sonde.coverage.complete_stack_ratio",
        "sonde.overhead.footprint_bytes",
    ] {
        assert!(tags.get(attribute).is_some(), "{attribute}");
    }
    let line = log_line(&f);
    assert!(line.starts_with("samples=0 "), "{line}");
}
