//! Ruby methods in the stacks, without flags or gems: Debian 12's own `ruby3.1` (stripped `libruby`)
//! runs `split.rb`, which spends 50/30/20% of its CPU in three pure-Ruby methods called from `main`
//! (one at the top level, an instance method and a class method of a class in a module, whose work a
//! block does) and measures that split itself, naming them as Ruby 3.4's backtraces do. sonde's
//! shares, by the same names (`Object#burn_a`, `Split::Burner#burn_b`, `Split::Burner.burn_c`,
//! classes read from the process), agree with the script's own accounting within ±5 points, ≥ 80%
//! of each method's samples sit under `Object#main` and `<main>`, and each Ruby frame names the
//! script's file and a line inside the method's body; the block is `block in
//! Split::Burner.burn_c`. The same holds with YJIT compiling the
//! script (`--yjit`, Ruby 3.1's own JIT): its code, in anonymous memory no table covers, is unwound
//! by its entry frame's fixed shape, so the stacks still reach the process's start, and its frames
//! are taken by the Ruby frames its code ran. Debian 11's Ruby 2.7, whose running context is a
//! global rather than thread-local, splits alike.

use crate::common::{
    python::{PySample, weight},
    scripted::{RUBY, RUBY27, Split, assert_jit_unwound},
};

/// The `def` line of `method` (`Class#name`, `Class.name`) in `split.rb` up to its `end`, as line
/// numbers.
fn body(method: &str) -> std::ops::RangeInclusive<i64> {
    let text = std::fs::read_to_string(RUBY.script("split.rb")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let short = method.rsplit(['#', '.']).next().unwrap();
    let def = lines
        .iter()
        .position(|l| {
            let l = l.trim_start();
            l == format!("def {short}") || l == format!("def self.{short}")
        })
        .unwrap_or_else(|| panic!("no `def {short}` in split.rb"));
    let indent = &lines[def][..lines[def].len() - lines[def].trim_start().len()];
    let close = format!("{indent}end");
    let end = def + lines[def..].iter().position(|l| *l == close).unwrap();
    (def as i64 + 1)..=(end as i64 + 1)
}

const SPLIT: Split = Split {
    script: "split.rb",
    roots: ["Object#main", "<main>"],
    body: &body,
};

#[test]
fn debian_ruby_splits_fifty_thirty_twenty_by_method_with_file_and_line() {
    let samples = RUBY.split(&[], &SPLIT, "ruby_split");
    let block = "block in Split::Burner.burn_c";
    let in_block = |s: &&PySample| RUBY.frames(s).any(|f| f.function == block);
    let of_c = |s: &&PySample| RUBY.frames(s).any(|f| f.function == "Split::Burner.burn_c");
    let (c, blocked) = (
        weight(samples.iter().filter(of_c)),
        weight(samples.iter().filter(of_c).filter(in_block)),
    );
    assert!(
        blocked as f64 >= 0.9 * c as f64,
        "{block} is in only {blocked} of burn_c's {c} samples"
    );
}

#[test]
fn yjits_code_is_unwound_to_the_root_and_named_as_ruby() {
    let samples = RUBY.split(&["--yjit"], &SPLIT, "ruby_yjit");
    assert_jit_unwound(&samples, &RUBY, "[jit]", "ruby_run_node");
}

#[test]
fn debian_11s_ruby_2_7_splits_alike() {
    RUBY27.split(&["--disable-gems"], &SPLIT, "ruby27_split");
}
