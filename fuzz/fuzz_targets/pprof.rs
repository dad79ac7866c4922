//! `sonde diff`'s pprof decoder on decompressed protobuf bytes. Seeds: profiles written by `sonde record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sonde::fuzzing::pprof(data));
