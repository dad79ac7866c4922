//! `/proc/PID/maps`. Seeds: real maps files of processes of this machine.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sonde::fuzzing::maps(data));
