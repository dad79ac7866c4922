//! The TOML configuration of `sonde run`. Seeds: deploy/systemd/sonde.toml and the documented keys.
#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| sonde::fuzzing::config(text));
