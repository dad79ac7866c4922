//! Entry points of the fuzz targets (`fuzz/`, run by `cargo xtask fuzz`): each hands arbitrary bytes to
//! one parser of input sonde does not control, the way the agent or `sonde diff` calls it. They only
//! have to return without panicking, hanging or exhausting memory; results are dropped. Not an API.

use std::path::Path;

use procfs::FromBufRead as _;

/// `sonde diff`'s pprof decoder, on decompressed protobuf bytes (tables, budget, samples, stacks).
pub fn pprof(bytes: &[u8]) {
    let _ = crate::diff::load::decode_for_fuzzing(bytes);
}

/// The TOML configuration file of `sonde run`, merged with no flags and an empty environment.
pub fn config(text: &str) {
    // `otlp.bearer_token_file` makes the merge read that file: the fuzzer would open whatever path it
    // spells (`/dev/zero`, a FIFO) and measure the filesystem, not the parser.
    let reads_a_file = text.parse::<toml::Table>().is_ok_and(|t| {
        t.get("otlp")
            .and_then(|o| o.as_table())
            .is_some_and(|o| o.contains_key("bearer_token_file"))
    });
    if reads_a_file {
        return;
    }
    let args = crate::config::RunArgs::default();
    let _ =
        crate::config::DaemonConfig::merge(Some((Path::new("fuzz.toml"), text)), &args, &|_| None);
}

/// `/proc/PID/cgroup`: as the agent reads it (procfs's parser, then the container and pod rules), and
/// as text.
pub fn cgroup(bytes: &[u8]) {
    if let Ok(groups) = procfs::ProcessCGroups::from_buf_read(bytes) {
        let _ = crate::metadata::cgroup::from_lines(
            groups.0.iter().map(|g| (g.hierarchy, g.pathname.as_str())),
        );
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = crate::metadata::cgroup::parse(text);
    }
}

/// `/proc/PID/maps`, down to the executable mappings the agent keeps.
pub fn maps(bytes: &[u8]) {
    let _ = crate::process::executable(crate::process::parse_maps(bytes));
}

/// One line of a data directory's `index.jsonl`, as `sonde diff --data` reads it, and the same text as
/// a `--since`/`--until` time (the other parser of that mode).
pub fn index_line(text: &str) {
    let _ = crate::diff::datadir::parse_entry(text);
    let _ = crate::diff::datadir::parse_time(text);
}
