//! Entry points of the fuzz targets (`fuzz/`, run by `cargo xtask fuzz`): each hands arbitrary bytes to
//! one parser of input sonde does not control, the way the agent or `sonde diff` calls it. They only
//! have to return without panicking, hanging or exhausting memory; results are dropped. Not an API.

use std::path::Path;

use procfs::FromBufRead as _;

/// The entry point of the fuzz target `name` (the names `cargo xtask fuzz --target` takes): one fuzz
/// binary serves them all, so they are instrumented and linked once.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    if let Some((_, target)) = crate::runtimes::registry::fuzz_targets().find(|(n, _)| *n == name) {
        return Some(*target);
    }
    Some(match name {
        "pprof" => pprof,
        "config" => |bytes| {
            if let Ok(text) = std::str::from_utf8(bytes) {
                config(text)
            }
        },
        "cgroup" => cgroup,
        "maps" => maps,
        "index_line" => |bytes| {
            if let Ok(text) = std::str::from_utf8(bytes) {
                index_line(text)
            }
        },
        "perf_map" => perf_map,
        "eh_frame" => eh_frame,
        "minidebuginfo" => minidebuginfo,
        "spool_file" => spool_file,
        _ => return None,
    })
}

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

/// The text of a JIT perf map (`/tmp/perf-PID.map`), which the profiled process writes.
pub fn perf_map(bytes: &[u8]) {
    let _ = crate::symbolize::perfmap::parse_lines(bytes);
}

/// The bytes of a binary's `.eh_frame`, through the CFI reader, the x86_64 rules and the table
/// assembly; the table must come out sorted, whatever the FDEs claim (overlaps, loops, garbage).
pub fn eh_frame(bytes: &[u8]) {
    if let Ok(table) = crate::unwind::table::build_eh_frame(bytes) {
        assert!(
            table.rows.windows(2).all(|w| w[0].pc < w[1].pc),
            "unwind rows out of order: the kernel's binary search would miss"
        );
    }
}

/// MiniDebugInfo (`.gnu_debugdata`): xz inflated within its bound, then read as the ELF it holds.
pub fn minidebuginfo(bytes: &[u8]) {
    if let Ok(elf) = crate::symbolize::debuginfo::minidebug::decompress(bytes) {
        let _ = crate::process::ElfInfo::parse(&elf);
    }
}

/// A disk spool file, as the replay reads it after a restart (checksummed, framed requests).
pub fn spool_file(bytes: &[u8]) {
    let _ = crate::export::spool::format::decode(bytes);
}

/// Every fuzz target replays its committed seeds and deterministic mutations of them (bytes flipped,
/// cut short, a run repeated) in the unit tests, so `cargo xtask test` checks every parser of hostile
/// input on every run at no build cost of its own. `cargo xtask fuzz` is the coverage-guided search.
#[cfg(test)]
mod replay {
    use std::time::{Duration, Instant};

    /// Mutations per seed, within a time budget per target (the `eh_frame` seeds are the slowest).
    const MUTATIONS: usize = 20_000;
    const BUDGET: Duration = Duration::from_secs(3);

    /// xorshift64: the same mutations on every run, so a failure replays.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
        let mut bytes = seed.to_vec();
        match rng.below(3) {
            0 => {
                for _ in 0..=rng.below(4) {
                    if !bytes.is_empty() {
                        let at = rng.below(bytes.len());
                        bytes[at] ^= 1 << rng.below(8);
                    }
                }
            }
            1 => bytes.truncate(rng.below(bytes.len() + 1)),
            _ => {
                let from = rng.below(bytes.len());
                let len = rng.below(64).min(bytes.len() - from.min(bytes.len()));
                let run = bytes[from..from + len].to_vec();
                let at = rng.below(bytes.len() + 1);
                bytes.splice(at..at, run);
            }
        }
        bytes
    }

    #[test]
    fn every_target_survives_its_seeds_and_their_mutations() {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
        let mut targets = 0;
        for dir in std::fs::read_dir(&corpus).expect("fuzz/corpus") {
            let dir = dir.unwrap().path();
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let target = super::target(&name)
                .unwrap_or_else(|| panic!("fuzz/corpus/{name} has no target in fuzzing::target"));
            let seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|f| std::fs::read(f.unwrap().path()).unwrap())
                .collect();
            assert!(!seeds.is_empty(), "fuzz/corpus/{name} has no seeds");
            let started = Instant::now();
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            for seed in &seeds {
                target(seed);
            }
            for i in 0..MUTATIONS {
                if started.elapsed() > BUDGET {
                    break;
                }
                target(&mutate(&seeds[i % seeds.len()], &mut rng));
            }
            targets += 1;
        }
        assert!(targets >= 10, "only {targets} fuzz targets have seeds");
    }
}
