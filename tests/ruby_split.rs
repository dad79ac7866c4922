//! Ruby methods in the stacks, without flags or gems: Debian 12's own `ruby3.1` (stripped `libruby`)
//! runs `split.rb`, which spends 50/30/20% of its CPU in three pure-Ruby methods called from `main`
//! and measures that split itself. sonde's shares agree with the script's own accounting within ±5
//! points, ≥ 80% of each method's samples sit under `main` and `<main>`, and each Ruby frame names
//! the script's file and a line inside the method's body.

use crate::common::scripted::{RUBY, Split};

/// The `def` line of `method` in `split.rb` up to its `end`, as line numbers.
fn body(method: &str) -> std::ops::RangeInclusive<i64> {
    let text = std::fs::read_to_string(RUBY.script("split.rb")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let def = lines
        .iter()
        .position(|l| *l == format!("def {method}"))
        .unwrap_or_else(|| panic!("no `def {method}` in split.rb"));
    let end = def + lines[def..].iter().position(|l| *l == "end").unwrap();
    (def as i64 + 1)..=(end as i64 + 1)
}

#[test]
fn debian_ruby_splits_fifty_thirty_twenty_by_method_with_file_and_line() {
    let split = Split {
        script: "split.rb",
        roots: ["main", "<main>"],
        body: &body,
    };
    RUBY.split(&[], &split, "ruby_split");
}
