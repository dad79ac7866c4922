//! `/proc/PID/cgroup`. Seeds: this machine's, and container/pod layouts of cgroup v1 and v2.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sonde::fuzzing::cgroup(data));
