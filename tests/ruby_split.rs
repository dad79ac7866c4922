//! Ruby methods in the stacks, without flags or gems: Debian 12's own `ruby3.1` (stripped `libruby`)
//! runs `split.rb`, which spends 50/30/20% of its CPU in three pure-Ruby methods called from `main`
//! and measures that split itself. sonde's shares agree with the script's own accounting within ±5
//! points, ≥ 80% of each method's samples sit under `main` and `<main>`, and each Ruby frame names
//! the script's file and a line inside the method's body. The same holds with YJIT compiling the
//! script (`--yjit`, Ruby 3.1's own JIT): its code, in anonymous memory no table covers, is unwound
//! by its entry frame's fixed shape, so the stacks still reach the process's start, and its frames
//! are taken by the Ruby frames its code ran. Debian 11's Ruby 2.7, whose running context is a
//! global rather than thread-local, splits alike.

use crate::common::{
    python::weight,
    scripted::{RUBY, RUBY27, Split},
};

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

const SPLIT: Split = Split {
    script: "split.rb",
    roots: ["main", "<main>"],
    body: &body,
};

#[test]
fn debian_ruby_splits_fifty_thirty_twenty_by_method_with_file_and_line() {
    RUBY.split(&[], &SPLIT, "ruby_split");
}

#[test]
fn yjits_code_is_unwound_to_the_root_and_named_as_ruby() {
    let samples = RUBY.split(&["--yjit"], &SPLIT, "ruby_yjit");
    let in_jit = weight(
        samples
            .iter()
            .filter(|s| s.frames.iter().any(|f| f.mapping == "[jit]")),
    );
    let rooted = weight(samples.iter().filter(|s| {
        let has = |name: &str| s.frames.iter().any(|f| f.function == name);
        has("ruby_run_node") && has("__libc_start_call_main")
    }));
    let all = weight(&samples);
    assert!(
        in_jit == 0 && rooted as f64 >= 0.95 * all as f64,
        "{in_jit} of {all} samples keep a YJIT frame, {rooted} reach ruby_run_node and libc's start"
    );
}

#[test]
fn debian_11s_ruby_2_7_splits_alike() {
    RUBY27.split(&["--disable-gems"], &SPLIT, "ruby27_split");
}
