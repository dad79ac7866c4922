//! One line of `index.jsonl` (and `--since`/`--until` times). Seeds: lines written by `sonde run`.
#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| sonde::fuzzing::index_line(text));
