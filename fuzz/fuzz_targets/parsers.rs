//! Every parser of input sonde does not control, in one libFuzzer binary: instrumenting and linking the
//! agent once instead of once per parser is most of the fuzzing cost. `SONDE_FUZZ_TARGET` names the
//! parser (`cargo xtask fuzz` sets it and gives each its own corpus, `fuzz/corpus/<name>`):
//! - `cgroup`: `/proc/PID/cgroup`. Seeds: this machine's, and container/pod layouts of cgroup v1 and
//!   v2.
//! - `config`: The TOML configuration of `sonde run`. Seeds: deploy/systemd/sonde.toml and the
//!   documented keys.
//! - `eh_frame`: A binary's `.eh_frame` (the profiled process chooses its binaries). Seeds: the
//!   sections of this machine's libc, python3.11 and a small C program.
//! - `index_line`: One line of `index.jsonl` (and `--since`/`--until` times). Seeds: lines written by
//!   `sonde run`.
//! - `maps`: `/proc/PID/maps`. Seeds: real maps files of processes of this machine.
//! - `minidebuginfo`: `.gnu_debugdata` (MiniDebugInfo): xz bytes inside a binary the profiled process
//!   maps. Seeds: xz streams of real ELF symbol tables, as Fedora's build makes them.
//! - `perf_map`: A JIT perf map's text (`/tmp/perf-PID.map`, written by the profiled process). Seeds:
//!   maps in the formats Node, the JVM's perf-map-agent and Python 3.12 `-X perf` write.
//! - `pprof`: `sonde diff`'s pprof decoder on decompressed protobuf bytes. Seeds: profiles written by
//!   `sonde record`.
//! - `python_linetable`: CPython line tables read from a profiled interpreter's memory. Seeds: real
//!   `co_lnotab`/ `co_linetable` bytes of CPython 3.9 to 3.13, behind a version byte and an instruction
//!   offset.
//! - `spool_file`: A disk spool file, read back after a restart (the disk may have damaged it). Seeds:
//!   spool files sonde wrote.
#![no_main]

use std::sync::OnceLock;

static TARGET: OnceLock<fn(&[u8])> = OnceLock::new();

fn target() -> fn(&[u8]) {
    *TARGET.get_or_init(|| {
        let name = std::env::var("SONDE_FUZZ_TARGET")
            .expect("set SONDE_FUZZ_TARGET to a target name (cargo xtask fuzz does)");
        sonde::fuzzing::target(&name)
            .unwrap_or_else(|| panic!("no fuzz target named {name:?} in sonde::fuzzing::target"))
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| target()(data));
