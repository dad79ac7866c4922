//! PHP functions in the stacks, without flags or extensions: Debian 12's own `php8.2` runs
//! `split.php`, which spends 50/30/20% of its CPU in a function, a static method and a function
//! whose work a closure does under `array_map` (a C function entering the executor again), all
//! called from `main`, and measures that split itself. sonde's shares agree with the script's own
//! accounting within ±5 points, ≥ 80% of each burner's samples sit under `main` and `{main}`, each
//! PHP frame names the script's file and a line inside the function's body, and the closure sits
//! above `array_map`'s native frames, in its own executor call's place. The same holds with
//! opcache's JIT compiling the script: its code, which has no unwind table, is unwound as the
//! executor's loop it runs on, so the stacks still reach `main`, and no frame is left in it.

use crate::common::{
    python::{PySample, weight},
    scripted::{PHP, Split, assert_jit_unwound},
};

/// The lines of the function `name` (`Class::method` or `function`) in `split.php`, from its
/// `function` line to its closing brace.
fn body(name: &str) -> std::ops::RangeInclusive<i64> {
    let short = name.rsplit("::").next().unwrap();
    let text = std::fs::read_to_string(PHP.script("split.php")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let def = lines
        .iter()
        .position(|l| l.contains(&format!("function {short}(")))
        .unwrap_or_else(|| panic!("no `function {short}(` in split.php"));
    let indent = &lines[def][..lines[def].len() - lines[def].trim_start().len()];
    let close = format!("{indent}}}");
    let end = def + lines[def..].iter().position(|l| *l == close).unwrap();
    (def as i64 + 1)..=(end as i64 + 1)
}

#[test]
fn debian_php_splits_fifty_thirty_twenty_by_function_with_file_and_line() {
    split(&[], "php_split");
}

/// opcache's tracing JIT on, as a production php-fpm may run it.
const JIT: &[&str] = &[
    "-d",
    "opcache.enable_cli=1",
    "-d",
    "opcache.jit_buffer_size=32M",
    "-d",
    "opcache.jit=tracing",
];

#[test]
fn the_jits_code_is_unwound_as_the_executor_and_named_as_php() {
    let samples = split(JIT, "php_jit");
    // The JIT's code is in opcache's shared memory (`/dev/zero`): each frame there took its PHP
    // frames' place, and each stack goes on below it to the executor's caller and the process's
    // start (Debian's `php8.2` keeps no name for its own `main`).
    assert_jit_unwound(&samples, &PHP, "zero", "zend_execute");
}

/// Runs `split.php` under `php8.2 flags`, checks what the module's documentation says, and returns
/// its samples.
fn split(flags: &[&str], name: &str) -> Vec<PySample> {
    let split = Split {
        script: "split.php",
        roots: ["main", "{main}"],
        body: &body,
    };
    let samples = PHP.split(flags, &split, name);
    let has = |s: &PySample, f: &str| PHP.frames(s).any(|p| p.function == f);
    // burn_c's closure runs in an executor call `array_map` entered: its frame is above the C
    // function's native frames (`zend_call_function`), burn_c below them.
    let closures: Vec<&PySample> = samples
        .iter()
        .filter(|s| has(s, "burn_c") && has(s, "{closure}"))
        .collect();
    let placed = weight(closures.iter().copied().filter(|s| {
        let at = |name: &str| s.frames.iter().position(|f| f.function == name);
        matches!(
            (at("{closure}"), at("zend_call_function"), at("burn_c")),
            (Some(c), Some(z), Some(b)) if c < z && z < b
        )
    }));
    let in_c = weight(samples.iter().filter(|s| has(s, "burn_c")));
    assert!(
        placed as f64 >= 0.9 * in_c as f64,
        "the closure is above zend_call_function and burn_c below in only {placed} of burn_c's {in_c} samples"
    );
    samples
}
