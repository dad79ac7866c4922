//! `sonde diff --label KEY=VALUE`: both sides restricted to the samples carrying one label, as a span's
//! `span_name` or a Go pprof label, so one operation's cost is compared release against release while
//! the rest of the process changes around it.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, diff_json, num, profile, row, scratch, sonde_diff, stack, write};

#[test]
fn only_the_labelled_samples_are_compared() {
    let dir = scratch("diff_label");
    // In `checkout`, `price` doubles its share from base to new; outside it, `search` grows instead.
    let base = write(
        &dir.join("b.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[
                stack("main;checkout;price", 200).label("span_name", "checkout"),
                stack("main;checkout;tax", 800).label("span_name", "checkout"),
                stack("main;search", 1_000).label("span_name", "search"),
            ],
        ),
    );
    let new = write(
        &dir.join("n.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[
                stack("main;checkout;price", 400).label("span_name", "checkout"),
                stack("main;checkout;tax", 600).label("span_name", "checkout"),
                stack("main;search", 3_000).label("span_name", "search"),
            ],
        ),
    );
    let args = |extra: &[&str]| {
        let mut all = vec![
            "--base".to_owned(),
            base.display().to_string(),
            "--new".to_owned(),
            new.display().to_string(),
        ];
        all.extend(extra.iter().map(|s| s.to_string()));
        all
    };
    let (json, _) = diff_json(args(&["--label", "span_name=checkout"]));
    let (_, price) = row(&json, "price");
    // 20% of checkout's samples before, 40% after; `search` is not compared at all.
    assert!((num(price, "base_self_pct") - 20.0).abs() < 0.5, "{price}");
    assert!((num(price, "new_self_pct") - 40.0).abs() < 0.5, "{price}");
    assert!(
        json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["function"] != "search"),
        "{json}"
    );
    // Unrestricted, search's growth dilutes price's.
    let (json, _) = diff_json(args(&[]));
    let (_, price) = row(&json, "price");
    assert!((num(price, "base_self_pct") - 10.0).abs() < 0.5, "{price}");
    // A label no sample carries leaves nothing to compare: said, not an empty table.
    let out = sonde_diff(args(&["--label", "span_name=refund"]));
    assert!(!out.status.success(), "a diff of no samples succeeded");
    let out = sonde_diff(args(&["--label", "span_name"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("KEY=VALUE"),
        "{stderr}"
    );
}
